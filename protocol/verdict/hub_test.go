package verdict

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestNotifyWakesItsSubjectOnly: a verdict wakes every request waiting on
// its subject, and none waiting on another.
func TestNotifyWakesItsSubjectOnly(t *testing.T) {
	h := New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := h.Mark()
	a1, a2, b := h.Wait(ctx, "a", m), h.Wait(ctx, "a", m), h.Wait(ctx, "b", m)
	if closed(a1) || closed(b) {
		t.Fatal("a wait ended before any notification")
	}
	h.Notify("a")
	if !closed(a1) || !closed(a2) {
		t.Error("Notify(a) left a request waiting on a")
	}
	if closed(b) {
		t.Error("Notify(a) woke a request waiting on b")
	}
}

// TestWaitAfterTheVerdict: a verdict notified between a request's Mark
// (before its read) and its Wait wakes it at once; one notified before
// the Mark does not (the read saw it).
func TestWaitAfterTheVerdict(t *testing.T) {
	h := New()
	ctx := context.Background()
	h.Notify("old")
	m := h.Mark()
	h.Notify("new")
	if !closed(h.Wait(ctx, "new", m)) {
		t.Error("a verdict notified after the Mark did not end a Wait from it")
	}
	if w := h.Wait(ctx, "old", m); closed(w) {
		t.Error("a verdict notified before the Mark ended a Wait from it")
	}
}

// TestWaitFromForgottenMark: once more notifications came than the Hub
// remembers, a Wait from an older Mark cannot tell, and wakes at once.
func TestWaitFromForgottenMark(t *testing.T) {
	h := New()
	m := h.Mark()
	for i := range remembered {
		h.Notify(fmt.Sprint(i))
	}
	if !closed(h.Wait(context.Background(), "other", m)) {
		t.Error("a Wait from a Mark older than the Hub remembers did not wake at once")
	}
	if got := len(h.last); got > remembered {
		t.Errorf("the Hub remembers %d subjects, want at most %d", got, remembered)
	}
	m = h.Mark()
	if closed(h.Wait(context.Background(), "other", m)) {
		t.Error("a Wait from a fresh Mark woke with nothing notified")
	}
}

// TestNotifyAllWakesEveryone: after a reconnection every request reads
// again, and a Wait from a Mark before it wakes at once.
func TestNotifyAllWakesEveryone(t *testing.T) {
	h := New()
	ctx := context.Background()
	m := h.Mark()
	a, b := h.Wait(ctx, "a", m), h.Wait(ctx, "b", m)
	h.NotifyAll()
	if !closed(a) || !closed(b) {
		t.Error("NotifyAll left a request waiting")
	}
	if !closed(h.Wait(ctx, "c", m)) {
		t.Error("a Wait from a Mark before NotifyAll did not wake at once")
	}
}

// TestWaitEndsWithItsContext: a wait whose request gave up is forgotten.
func TestWaitEndsWithItsContext(t *testing.T) {
	h := New()
	ctx, cancel := context.WithCancel(context.Background())
	keep, cancelKeep := context.WithCancel(context.Background())
	defer cancelKeep()
	w := h.Wait(ctx, "a", h.Mark())
	h.Wait(keep, "a", h.Mark())
	cancel()
	waitFor(t, func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.waits["a"] != nil && h.waits["a"].n == 1 })
	cancelKeep()
	waitFor(t, func() bool { return len(h.waiting()) == 0 })
	if closed(w) {
		t.Error("a wait's channel closed when its context ended; it closes only for a verdict")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
	}
}

// TestPollWakesSettled: the poll asks about the subjects waited on, in one
// call, only while any is waited on, and wakes those it is told settled.
func TestPollWakesSettled(t *testing.T) {
	h := New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var calls [][]string
	settledSet := map[string]bool{}
	go func() {
		_ = h.Poll(ctx, time.Millisecond, func(_ context.Context, ids []string) ([]string, error) {
			mu.Lock()
			defer mu.Unlock()
			slices.Sort(ids)
			calls = append(calls, ids)
			var out []string
			for _, id := range ids {
				if settledSet[id] {
					out = append(out, id)
				}
			}
			return out, nil
		})
	}()
	time.Sleep(20 * time.Millisecond)
	mu.Lock()
	if len(calls) != 0 {
		t.Errorf("the poll read %d times with nothing waited on", len(calls))
	}
	mu.Unlock()
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	a, b := h.Wait(wctx, "a", h.Mark()), h.Wait(wctx, "b", h.Mark())
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(calls) > 0 })
	mu.Lock()
	if !slices.Equal(calls[0], []string{"a", "b"}) {
		t.Errorf("the poll asked about %v, want [a b]", calls[0])
	}
	settledSet["a"] = true
	mu.Unlock()
	select {
	case <-a:
	case <-time.After(5 * time.Second):
		t.Fatal("the poll did not wake the request waiting on a settled subject")
	}
	if closed(b) {
		t.Error("the poll woke a request waiting on a subject still processing")
	}
}
