package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/store/postgres"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// TestReadOnlyConnectionDropped: a pooled connection whose server stopped
// taking writes (here its session made read-only, as a fenced or demoted
// primary's are) makes a write an outage, store.ErrUnavailable, once: the
// connection is closed rather than reused, and the next write dials again
// and succeeds. Without the drop every later write on it would fail.
func TestReadOnlyConnectionDropped(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url := testdb.Postgres(t)
	if err := open.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	pool, err := postgres.Connect(ctx, url, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st := postgres.New(pool, jobs.NewPostgres(pool).Inserter())
	var before int
	if err := pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `SET default_transaction_read_only = on`); err != nil {
		t.Fatal(err)
	}
	_, err = st.AccountCreate(ctx, newAccount("fenced"))
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a write on a read-only session: %v, want store.ErrUnavailable", err)
	}
	if _, err := st.AccountCreate(ctx, newAccount("after")); err != nil {
		t.Fatalf("the next write, on a new connection: %v", err)
	}
	var after int
	if err := pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after == before {
		t.Errorf("the read-only session %d is still the pool's", before)
	}
}
