// Package verdict wakes the requests waiting for a worker's verdict on a
// challenge or an order (server.verdict_wait_ms). A frontend has one Hub;
// one source feeds it — PostgreSQL's LISTEN on one connection of its own
// (store/postgres.Listen), or on SQLite a poll of the subjects waited on
// (Hub.Poll) — and Notify wakes every request waiting on that subject, in
// memory: a thousand waiting requests cost one listener, no database
// connection each.
package verdict

import (
	"context"
	"sync"
	"time"
)

// Mark is a point in a Hub's notifications: a request takes one before it
// reads a subject, and waits from it, so a verdict notified between its
// read and its wait is not missed.
type Mark uint64

// remembered is how many notifications a Hub keeps to answer a Wait from
// an earlier Mark; a Wait from a Mark older than that wakes at once (the
// caller reads again, which costs a read, never a missed verdict).
const remembered = 4096

// pollRest is how many times as long as its last read Poll sleeps at
// least: it spends at most a fifth of its time reading.
const pollRest = 4

// Hub fans notifications out to the requests waiting on their subjects. It
// is safe for concurrent use.
type Hub struct {
	mu     sync.Mutex
	seq    uint64             // notifications so far
	resync uint64             // seq of the last NotifyAll
	last   map[string]uint64  // each remembered subject's last notification
	ring   [remembered]noted  // the last notifications, ring[seq%remembered] the latest
	waits  map[string]*waiter // subjects waited on
	busy   chan struct{}      // a wait began while none was waiting (Poll)
}

type noted struct {
	id  string
	seq uint64
}

// waiter is the requests waiting on one subject: done closes to wake them.
type waiter struct {
	done chan struct{}
	n    int
}

// New returns a Hub with nothing waiting.
func New() *Hub {
	return &Hub{last: map[string]uint64{}, waits: map[string]*waiter{}, busy: make(chan struct{}, 1)}
}

// Mark is the Hub's point now.
func (h *Hub) Mark() Mark {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Mark(h.seq)
}

// Wait returns a channel closed when subjectID is notified after since (at
// once if it already was, or if the Hub cannot tell), or when NotifyAll
// runs. The wait ends with ctx: the channel then stays open, and the Hub
// forgets it.
func (h *Hub) Wait(ctx context.Context, subjectID string, since Mark) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.notifiedSince(subjectID, uint64(since)) {
		done := make(chan struct{})
		close(done)
		return done
	}
	w := h.waits[subjectID]
	if w == nil {
		w = &waiter{done: make(chan struct{})}
		if len(h.waits) == 0 {
			select {
			case h.busy <- struct{}{}:
			default:
			}
		}
		h.waits[subjectID] = w
	}
	w.n++
	context.AfterFunc(ctx, func() { h.leave(subjectID, w) })
	return w.done
}

// notifiedSince reports whether id may have been notified after since.
func (h *Hub) notifiedSince(id string, since uint64) bool {
	if h.resync > since || h.seq-since >= remembered {
		return true
	}
	return h.last[id] > since
}

func (h *Hub) leave(id string, w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w.n--
	if w.n == 0 && h.waits[id] == w {
		delete(h.waits, id)
	}
}

// Notify wakes the requests waiting on subjectID: its verdict committed.
func (h *Hub) Notify(subjectID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	slot := &h.ring[h.seq%remembered]
	if slot.id != "" && h.last[slot.id] == slot.seq {
		delete(h.last, slot.id)
	}
	*slot = noted{id: subjectID, seq: h.seq}
	h.last[subjectID] = h.seq
	if w := h.waits[subjectID]; w != nil {
		close(w.done)
		delete(h.waits, subjectID)
	}
}

// NotifyAll wakes every waiting request: notifications may have been lost
// (the listener reconnected), so each reads its subject again.
func (h *Hub) NotifyAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	h.resync = h.seq
	for id, w := range h.waits {
		close(w.done)
		delete(h.waits, id)
	}
}

// waiting is the subjects waited on now.
func (h *Hub) waiting() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	ids := make([]string, 0, len(h.waits))
	for id := range h.waits {
		ids = append(ids, id)
	}
	return ids
}

// Poll feeds the Hub from a database that cannot push: while any request
// waits, it asks settled which of the subjects waited on are no longer
// processing, in one read whatever their number, and notifies those. The
// reads come every `every`, or pollRest times as long as the last read
// took apart, when that is longer (a read costs about 4 µs a subject on
// SQLite: 2.4 ms for 500), so polling never takes more than a fifth of a
// core. With nothing waiting it sleeps until a wait begins. A read that fails is tried again
// at the next tick (the waits meanwhile end at their deadline). It returns
// when ctx ends.
func (h *Hub) Poll(ctx context.Context, every time.Duration, settled func(ctx context.Context, ids []string) ([]string, error)) error {
	t := time.NewTimer(every)
	defer t.Stop()
	next := every
	for {
		if len(h.waiting()) == 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-h.busy:
			}
		}
		t.Reset(next)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		ids := h.waiting()
		if len(ids) == 0 {
			continue
		}
		start := time.Now()
		done, err := settled(ctx, ids)
		next = max(every, pollRest*time.Since(start))
		if err != nil {
			continue
		}
		for _, id := range done {
			h.Notify(id)
		}
	}
}
