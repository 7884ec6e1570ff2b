package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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

// TestNoWritableHostIsUnavailable: while database.url names no server that
// takes writes (a failover between the old primary's end and the standby's
// promotion), target_session_attrs=read-write refuses every host, and a
// write, a read and a ping are store.ErrUnavailable, which the frontend
// answers 503 with Retry-After; once a host takes writes again the store
// works, with no restart.
func TestNoWritableHostIsUnavailable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url := testdb.Postgres(t)
	if err := open.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var db string
	if err := admin.QueryRow(ctx, `SELECT current_database()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	readOnly := func(on bool) {
		t.Helper()
		q := `ALTER DATABASE ` + pgx.Identifier{db}.Sanitize() + ` SET default_transaction_read_only = on`
		if !on {
			q = `ALTER DATABASE ` + pgx.Identifier{db}.Sanitize() + ` RESET default_transaction_read_only`
		}
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	readOnly(true)
	st, _ := outageStore(t, url+"&target_session_attrs=read-write")
	_, err = st.AccountCreate(ctx, newAccount("no-primary"))
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("a write with no host taking writes: %v, want store.ErrUnavailable", err)
	}
	if _, err := st.AccountByThumbprint(ctx, "no-primary"); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("a read with no host taking writes: %v, want store.ErrUnavailable", err)
	}
	if err := st.Ping(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("a ping with no host taking writes: %v, want store.ErrUnavailable", err)
	}
	readOnly(false)
	if _, err := st.AccountCreate(ctx, newAccount("primary-back")); err != nil {
		t.Errorf("a write once a host takes writes: %v", err)
	}
}
