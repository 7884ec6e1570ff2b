package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/store/postgres"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// outageStore is a store on one pooled connection to url.
func outageStore(t *testing.T, url string) (store.Store, *pgxpool.Pool) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg) // connects lazily
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return postgres.New(pool, jobs.NewPostgres(pool).Inserter()), pool
}

func newAccount(thumb string) *store.Account {
	return &store.Account{KeyJWK: []byte(`{}`), Thumbprint: thumb, Status: acme.StatusValid}
}

// TestOutageIsUnavailable: what PostgreSQL does when it goes away — its
// session ended by an administrator (57P01), the connection reset
// mid-use, new connections refused — is store.ErrUnavailable, on a read,
// a write and a ping, and the store works again once the database is
// back; a unique conflict stays ErrConflict.
func TestOutageIsUnavailable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url := testdb.Postgres(t)
	if err := open.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	wantOutage := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s: %v, want store.ErrUnavailable", what, err)
		}
	}

	t.Run("terminated", func(t *testing.T) {
		st, pool := outageStore(t, url)
		acct, err := st.AccountCreate(ctx, newAccount("terminated"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = st.AccountCreate(ctx, newAccount("terminated"))
		if !errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrUnavailable) {
			t.Errorf("a second account for one key: %v, want ErrConflict alone", err)
		}
		var pid int
		if err := pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		admin, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
			t.Fatal(err)
		}
		_, err = st.AccountByID(ctx, acct.ID)
		wantOutage("a read on a session an administrator ended", err)
		if _, err := st.AccountByID(ctx, acct.ID); err != nil {
			t.Errorf("a read on a new session afterwards: %v", err)
		}
	})

	t.Run("cut", func(t *testing.T) {
		link, via := testdb.Cuttable(t, url)
		st, _ := outageStore(t, via)
		acct, err := st.AccountCreate(ctx, newAccount("cut"))
		if err != nil {
			t.Fatal(err)
		}
		link.Cut()
		_, err = st.AccountByID(ctx, acct.ID)
		wantOutage("a read on a connection reset", err)
		_, err = st.AccountCreate(ctx, newAccount("cut-during"))
		wantOutage("a write with new connections refused", err)
		wantOutage("a ping with new connections refused", st.Ping(ctx))
		link.Mend()
		if err := st.Ping(ctx); err != nil {
			t.Errorf("a ping once the database is back: %v", err)
		}
		if _, err := st.AccountCreate(ctx, newAccount("cut-after")); err != nil {
			t.Errorf("a write once the database is back: %v", err)
		}
	})

	t.Run("refused", func(t *testing.T) {
		link, via := testdb.Cuttable(t, url)
		link.Cut()
		st, _ := outageStore(t, via)
		_, err := st.AccountByThumbprint(ctx, "refused")
		wantOutage("a read with the database never reachable", err)
		if !strings.Contains(fmt.Sprint(err), "connection refused") {
			t.Errorf("the outage does not keep its cause for the log: %v", err)
		}
	})
}
