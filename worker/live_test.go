package worker

import (
	"context"
	"testing"

	"github.com/hallmark-ca/hallmark/jobs"
)

// TestLiveSwap: a job started before a swap runs on the Worker it started
// with, jobs after it on the new one, and the old one reports drained only
// once its last job has ended.
func TestLiveSwap(t *testing.T) {
	old, next := &Worker{id: "old"}, &Worker{id: "next"}
	l := NewLive(old)
	running := make(chan struct{})
	finish := make(chan struct{})
	ran := make(chan string, 2)
	h := via(l, func(w *Worker, _ context.Context, _ jobs.Job[jobs.HousekeepingArgs]) error {
		ran <- w.id
		if w.id == "old" {
			close(running)
			<-finish
		}
		return nil
	})
	done := make(chan error)
	go func() { done <- h(context.Background(), jobs.Job[jobs.HousekeepingArgs]{}) }()
	<-running
	drained, err := l.Swap(next)
	if err != nil {
		t.Fatal(err)
	}
	if err := h(context.Background(), jobs.Job[jobs.HousekeepingArgs]{}); err != nil {
		t.Fatal(err)
	}
	if a, b := <-ran, <-ran; a != "old" || b != "next" {
		t.Fatalf("jobs ran on %s then %s, want old (started before the swap) then next", a, b)
	}
	select {
	case <-drained:
		t.Fatal("the old Worker reported drained while a job still ran on it")
	default:
	}
	close(finish)
	<-done
	<-drained
	if l.Current() != next {
		t.Fatal("the current Worker is not the one swapped in")
	}
}

// TestLiveSwapRefusesOtherQueues: a Worker that would work another
// profile's queue is refused, and the current one stays.
func TestLiveSwapRefusesOtherQueues(t *testing.T) {
	cur := &Worker{mounts: map[string]mount{}}
	l := NewLive(cur)
	if _, err := l.Swap(&Worker{mounts: map[string]mount{"other": {}}}); err == nil {
		t.Fatal("a Worker with another queue was swapped in")
	}
	if l.Current() != cur {
		t.Fatal("a refused swap changed the current Worker")
	}
	drained, err := l.Swap(&Worker{mounts: map[string]mount{}})
	if err != nil {
		t.Fatal(err)
	}
	<-drained // no job ran on the old one
}
