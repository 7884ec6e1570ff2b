package worker_test

import (
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/worker"
)

// TestAccountSlotsPace: an account holds at most its share of the slots
// (at least one), other accounts are not counted against it, and the
// validations it puts back are spread at the rate its slots free: by
// minTook (250 ms) over the cap before any finished, then by how long its
// validations took.
func TestAccountSlotsPace(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := worker.NewAccountSlots(0.1, 100)
	var started []time.Time
	for i := range 10 {
		now := t0.Add(time.Duration(i) * time.Millisecond)
		if _, ok := s.Take("a", now); !ok {
			t.Fatalf("take %d of account a refused, want 10 slots", i+1)
		}
		started = append(started, now)
	}
	if _, ok := s.Take("b", t0); !ok {
		t.Fatal("account b refused while only account a holds its share")
	}
	now := t0.Add(10 * time.Millisecond)
	for i, want := range []time.Duration{25, 50, 75} {
		wait, ok := s.Take("a", now)
		if ok || wait != want*time.Millisecond {
			t.Fatalf("take %d over the share: ok %v, wait %s; want refused, %dms", i+1, ok, wait, want)
		}
	}

	// Every validation took 5 s: a slot frees every 500 ms.
	done := t0.Add(5 * time.Second)
	for _, st := range started {
		s.Give("a", st, done)
	}
	for i := range 10 {
		if _, ok := s.Take("a", done); !ok {
			t.Fatalf("take %d after the slots freed refused", i+1)
		}
	}
	for i, want := range []time.Duration{25 * time.Millisecond, 525 * time.Millisecond, 1025 * time.Millisecond} {
		wait, ok := s.Take("a", done)
		if ok || wait < want-10*time.Millisecond || wait > want {
			t.Fatalf("take %d over the share after 5 s validations: ok %v, wait %s; want refused, about %s", i+1, ok, wait, want)
		}
	}

	one := worker.NewAccountSlots(0.001, 100)
	if _, ok := one.Take("c", t0); !ok {
		t.Fatal("a share under one slot refused the account's first validation; want at least one slot")
	}
	if _, ok := one.Take("c", t0); ok {
		t.Fatal("a share under one slot let a second validation in")
	}
}
