package worker

import (
	"context"
	"log/slog"
	"slices"
	"strings"
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
// profile's queue is refused while no job runner follows, swapped in and
// followed once one does; one that would drop a queue is refused, and the
// current one stays.
func TestLiveSwapRefusesOtherQueues(t *testing.T) {
	cur := &Worker{mounts: map[string]mount{"one": {}}, log: slog.New(slog.DiscardHandler)}
	l := NewLive(cur)
	added := &Worker{mounts: map[string]mount{"one": {}, "other": {}}, log: cur.log}
	if _, err := l.Swap(added); err == nil {
		t.Fatal("a Worker with another queue was swapped in with no runner to follow it")
	}
	if l.Current() != cur {
		t.Fatal("a refused swap changed the current Worker")
	}
	f := &follower{}
	l.Follow(f)
	if _, err := l.Swap(&Worker{mounts: map[string]mount{}, log: cur.log}); err == nil || !strings.Contains(err.Error(), jobs.ProfileQueue("one")) {
		t.Fatalf("a Worker dropping profile one's queue: %v", err)
	}
	drained, err := l.Swap(added)
	if err != nil {
		t.Fatal(err)
	}
	<-drained // no job ran on the old one
	if l.Current() != added || len(f.got) != 1 || !slices.Contains(f.got[0].Queues, jobs.ProfileQueue("other")) {
		t.Fatalf("after the swap: current %p (want %p), runner told %v", l.Current(), added, f.got)
	}
}

type follower struct{ got []jobs.Settings }

func (f *follower) Follow(s jobs.Settings) error { f.got = append(f.got, s); return nil }
