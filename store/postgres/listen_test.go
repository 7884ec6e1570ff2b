package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/store/postgres"
	"github.com/hallmark-ca/hallmark/store/sqlstore"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// heard records what Listen tells.
type heard struct {
	mu        sync.Mutex
	payloads  []string
	connected int
}

func (h *heard) Notify(p string) { h.mu.Lock(); h.payloads = append(h.payloads, p); h.mu.Unlock() }
func (h *heard) NotifyAll()      { h.mu.Lock(); h.connected++; h.mu.Unlock() }

func (h *heard) until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		h.mu.Lock()
		ok := cond()
		h.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20 s", what)
		}
	}
}

// TestListenReconnects: the listener passes on each verdict's
// announcement; when its connection is killed it connects again, says so
// (NotifyAll: the waiting requests read again, for what it missed), and
// goes on passing announcements on.
func TestListenReconnects(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := testdb.Postgres(t)
	pool, err := postgres.Connect(ctx, url, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	h := &heard{}
	lctx, lcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- postgres.Listen(lctx, pool, h) }()
	h.until(t, "the first connection", func() bool { return h.connected == 1 })

	announce := func(p string) {
		t.Helper()
		if _, err := pool.Exec(ctx, `SELECT pg_notify($1, $2)`, sqlstore.VerdictChannel, p); err != nil {
			t.Fatal(err)
		}
	}
	announce("before")
	h.until(t, "the first announcement", func() bool { return len(h.payloads) == 1 && h.payloads[0] == "before" })

	tag, err := pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND query = 'LISTEN `+sqlstore.VerdictChannel+`'`)
	if err != nil {
		t.Fatal(err)
	}
	if tag.RowsAffected() != 1 {
		t.Fatalf("terminated %d listening backends, want 1", tag.RowsAffected())
	}
	h.until(t, "the connection made again", func() bool { return h.connected == 2 })
	announce("after")
	h.until(t, "the announcement after the reconnection", func() bool { return len(h.payloads) == 2 && h.payloads[1] == "after" })

	lcancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("Listen returned %v when its context ended, want context.Canceled", err)
	}
}
