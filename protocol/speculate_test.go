package protocol

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestSpecPool: the pool runs at most one goroutine per CPU; with all of
// them busy a job is refused (its request verifies inline) rather than
// queued behind other requests' checks; an idle goroutine takes the next
// job; and idle goroutines exit.
func TestSpecPool(t *testing.T) {
	p := &specPool{jobs: make(chan func())}
	cpus := runtime.GOMAXPROCS(0)
	release := make(chan struct{})
	var ran sync.WaitGroup
	accepted := 0
	for range cpus + 3 {
		ran.Add(1)
		if p.submit(func() { defer ran.Done(); <-release }) {
			accepted++
		} else {
			ran.Done()
		}
	}
	if accepted != cpus {
		t.Fatalf("accepted %d jobs with every goroutine busy, want %d (one per CPU)", accepted, cpus)
	}
	close(release)
	ran.Wait()

	// The goroutines now wait for work: a job goes to one of them.
	done := make(chan struct{})
	deadline := time.Now().Add(5 * time.Second)
	for !p.submit(func() { close(done) }) {
		if time.Now().After(deadline) {
			t.Fatal("an idle pool refused a job")
		}
		time.Sleep(time.Millisecond)
	}
	<-done
	p.mu.Lock()
	n := p.n
	p.mu.Unlock()
	if n > cpus {
		t.Fatalf("%d goroutines, want at most %d", n, cpus)
	}
	// After specIdle without work they are gone.
	deadline = time.Now().Add(specIdle + 5*time.Second)
	for {
		p.mu.Lock()
		n = p.n
		p.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines still running %s after the last job", n, specIdle+5*time.Second)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
