package sqlstore

import (
	"testing"
	"time"
)

// TestMemNonces: SQLite's consumed-nonce set accepts a nonce of its epoch
// once, refuses another epoch's, forgets a nonce only once it has expired,
// and when full of live nonces starts a new epoch rather than forget one
// that could still be redeemed.
func TestMemNonces(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	live, expired := now.Add(time.Hour), now.Add(-time.Second)
	type step struct {
		nonce      string
		epoch      string // "mine": the set's epoch when the test started; "other"; "new": the epoch after a rotation
		expires    time.Time
		wantFresh  bool
		wantRotate bool // the set is on a new epoch after this step
	}
	tests := []struct {
		name     string
		max      int
		steps    []step
		wantSize int
	}{
		{"once", 8, []step{
			{"a", "mine", live, true, false},
			{"a", "mine", live, false, false},
			{"b", "mine", live, true, false},
		}, 2},
		{"another epoch's", 8, []step{
			{"a", "other", live, false, false},
			{"a", "mine", live, true, false},
		}, 1},
		{"full of live nonces: a new epoch", 2, []step{
			{"a", "mine", live, true, false},
			{"b", "mine", live, true, false},
			{"c", "mine", live, false, true},
			{"a", "new", live, true, true}, // forgotten, but only under an epoch no client has yet
		}, 1},
		{"full, with an expired one to forget", 2, []step{
			{"a", "mine", expired, true, false},
			{"b", "mine", live, true, false},
			{"c", "mine", live, true, false},
			{"b", "mine", live, false, false},
		}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newMemNonces(tc.max)
			mine := m.current()
			for i, st := range tc.steps {
				epoch := map[string]int64{"mine": mine, "other": mine + 1, "new": m.current()}[st.epoch]
				fresh, cur := m.consume(st.nonce, epoch, st.expires, now)
				if fresh != st.wantFresh {
					t.Errorf("step %d (%s, %s epoch): fresh %v, want %v", i, st.nonce, st.epoch, fresh, st.wantFresh)
				}
				if rotated := cur != mine; rotated != st.wantRotate || cur != m.current() || cur == 0 {
					t.Errorf("step %d: epoch %d (was %d, set says %d); want a new one: %v", i, cur, mine, m.current(), st.wantRotate)
				}
			}
			if len(m.used) != tc.wantSize {
				t.Errorf("%d nonces remembered, want %d", len(m.used), tc.wantSize)
			}
		})
	}
}

// TestMemNoncesSweep: a sweep forgets exactly the expired nonces, so a
// live one is still refused after it; consume sweeps on its own every
// memSweepEvery nonces.
func TestMemNoncesSweep(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	m := newMemNonces(1 << 20)
	e := m.current()
	m.consume("old", e, now.Add(-time.Second), now)
	m.consume("at-now", e, now, now) // expires this second: kept until the next
	m.consume("live", e, now.Add(time.Hour), now)
	if n := m.sweep(now); n != 1 {
		t.Fatalf("sweep forgot %d nonces, want 1", n)
	}
	if fresh, _ := m.consume("live", e, now.Add(time.Hour), now); fresh {
		t.Fatal("a live nonce was accepted again after a sweep")
	}
	if fresh, _ := m.consume("at-now", e, now, now); fresh {
		t.Fatal("a nonce expiring this second was accepted again after a sweep")
	}
	later := now.Add(2 * time.Hour)
	for i := range memSweepEvery + 1 {
		m.consume(string(rune('A'+i%26))+time.Duration(i).String(), e, later.Add(time.Hour), later)
	}
	if _, ok := m.used[idOf("live")]; ok {
		t.Fatal("consume never swept: an expired nonce is still remembered")
	}
}
