package postgres_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/store/postgres"
	"github.com/hallmark-ca/hallmark/tests/testdb"
	"github.com/jackc/pgx/v5/pgxpool"
)

// newStore opens a fresh database the way the binaries do (open.Open,
// then Hallmark's and River's migrations) and a handle of its own to look
// at it directly.
func newStore(t *testing.T) (store.Store, raw) {
	ctx := context.Background()
	url := testdb.Postgres(t)
	db, err := open.Open(ctx, url, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	pool, err := postgres.Connect(ctx, url, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return db.Store, raw{pool}
}

// raw runs SQL on a handle beside the store's.
type raw struct{ pool *pgxpool.Pool }

func (r raw) Int(t *testing.T, q string) int64 {
	var n int64
	if err := r.pool.QueryRow(t.Context(), q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func (r raw) Exec(t *testing.T, q string) {
	if _, err := r.pool.Exec(t.Context(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// TestConnectSize: a pool the configuration does not size gets
// DefaultConns, four per CPU, not pgx's default or a fixed number; a
// configured size is kept.
func TestConnectSize(t *testing.T) {
	t.Parallel()
	url := testdb.Postgres(t)
	for _, tc := range []struct{ asked, want int }{{0, postgres.DefaultConns()}, {3, 3}} {
		pool, err := postgres.Connect(t.Context(), url, tc.asked)
		if err != nil {
			t.Fatal(err)
		}
		if got := int(pool.Config().MaxConns); got != tc.want {
			t.Errorf("Connect(max_conns %d): a pool of %d, want %d", tc.asked, got, tc.want)
		}
		pool.Close()
	}
	if n := postgres.DefaultConns(); n != 4*runtime.GOMAXPROCS(0) {
		t.Errorf("DefaultConns = %d, want 4 per CPU (%d)", n, 4*runtime.GOMAXPROCS(0))
	}
}
