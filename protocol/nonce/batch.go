package nonce

import (
	"context"
	"sync"
	"time"

	"github.com/hallmark-ca/hallmark/store"
)

// The batcher turns concurrent redemptions into few store calls: a request
// joins the queue, and a flusher takes everything queued so far into one
// NonceConsume — one round trip and one commit for the lot (group commit).
// A flush runs under its own deadline, not any one request's, because it
// answers many; a request that gives up waiting just stops listening.
//
// With nothing in flight, the request makes its round trip itself, on its
// own goroutine, and checks its signature while the database works
// (store.NoncesMeanwhile). Handing the round trip to a new flusher
// goroutine instead wakes a second thread, and on a virtual machine whose
// other CPU has gone idle that wake-up takes as long as the signature
// check it was meant to overlap.
const (
	maxFlushes   = 2   // flushes in flight at once; more would only queue on the database
	maxBatch     = 256 // uses per flush
	flushTimeout = 10 * time.Second
)

type call struct {
	use  store.NonceUse
	res  store.NonceUsed
	err  error
	done chan struct{}
}

type batcher struct {
	st Store

	mu       sync.Mutex
	queue    []*call
	flushing int
}

// start queues use, runs meanwhile (if not nil) on the caller's goroutine,
// and returns use's call, whose done closes when a flush has answered it.
// When no flush is in flight the caller's own goroutine makes the round
// trip, under ctx, running meanwhile while it is in flight where the store
// can, and start returns once it is answered. Otherwise a flush runs on
// another goroutine while meanwhile runs here.
func (b *batcher) start(ctx context.Context, use store.NonceUse, meanwhile func()) *call {
	c := &call{use: use, done: make(chan struct{})}
	b.mu.Lock()
	if b.flushing == 0 && len(b.queue) == 0 {
		// The batch is this call alone, so the request's own deadline
		// is the flush's.
		b.flushing++
		b.mu.Unlock()
		defer b.ownDone() // even if meanwhile panics
		fctx, cancel := context.WithTimeout(ctx, flushTimeout)
		defer cancel()
		b.send(fctx, []*call{c}, meanwhile)
		return c
	}
	b.queue = append(b.queue, c)
	if b.flushing < maxFlushes {
		b.flushing++
		go b.flush()
	}
	b.mu.Unlock()
	if meanwhile != nil {
		meanwhile()
	}
	return c
}

// ownDone ends a round trip a caller made on its own goroutine (start).
func (b *batcher) ownDone() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushing--
	if len(b.queue) > 0 && b.flushing < maxFlushes {
		// Calls queued meanwhile have at most one flusher out for them;
		// start the second they would have started themselves.
		b.flushing++
		go b.flush()
	}
}

// wait is c's answer, or ctx's error if ctx ends first.
func (c *call) wait(ctx context.Context) (store.NonceUsed, error) {
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		return store.NonceUsed{}, ctx.Err()
	}
}

// flush sends batches until the queue is empty, then exits.
func (b *batcher) flush() {
	for {
		b.mu.Lock()
		n := min(len(b.queue), maxBatch)
		if n == 0 {
			b.flushing--
			b.mu.Unlock()
			return
		}
		batch := make([]*call, n)
		copy(batch, b.queue)
		b.queue = append(b.queue[:0], b.queue[n:]...)
		b.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
		b.send(ctx, batch, nil)
		cancel()
	}
}

// send consumes batch's nonces in one store call, with meanwhile run while
// it is in flight where the store can (and before it otherwise), and
// answers each call.
func (b *batcher) send(ctx context.Context, batch []*call, meanwhile func()) {
	uses := make([]store.NonceUse, len(batch))
	for i, c := range batch {
		uses[i] = c.use
	}
	var got []store.NonceUsed
	var err error
	if ms, ok := b.st.(store.NoncesMeanwhile); ok && meanwhile != nil {
		got, err = ms.NonceConsumeMeanwhile(ctx, uses, meanwhile)
	} else {
		if meanwhile != nil {
			meanwhile()
		}
		got, err = b.st.NonceConsume(ctx, uses)
	}
	for i, c := range batch {
		if err == nil && len(got) == len(batch) {
			c.res = got[i]
		} else if err == nil {
			c.err = errShortAnswer
		} else {
			c.err = err
		}
		close(c.done)
	}
}
