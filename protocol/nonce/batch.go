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
// With one request in flight it adds nothing: a flusher starts at once.
// A flush runs under its own deadline, not any one request's, because it
// answers many; a request that gives up waiting just stops listening.
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

// start queues use and returns its call, whose done closes when a flush
// has answered it. The flush runs on another goroutine, so the caller can
// do other work before wait.
func (b *batcher) start(use store.NonceUse) *call {
	c := &call{use: use, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	if b.flushing < maxFlushes {
		b.flushing++
		go b.flush()
	}
	b.mu.Unlock()
	return c
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

		uses := make([]store.NonceUse, n)
		for i, c := range batch {
			uses[i] = c.use
		}
		ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
		got, err := b.st.NonceConsume(ctx, uses)
		cancel()
		for i, c := range batch {
			if err == nil && len(got) == n {
				c.res = got[i]
			} else if err == nil {
				c.err = errShortAnswer
			} else {
				c.err = err
			}
			close(c.done)
		}
	}
}
