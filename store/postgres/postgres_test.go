package postgres_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/store/postgres"
	"github.com/hallmark-ca/hallmark/store/sqlstore"
	"github.com/hallmark-ca/hallmark/store/storetest"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

func TestContract(t *testing.T) {
	t.Run("postgres", func(t *testing.T) { storetest.Run(t, newStore) })
}

// newStore opens a fresh database the way the binaries do (open.Open,
// then Hallmark's and River's migrations) and gives the suite its extras
// through handles of their own.
func newStore(t *testing.T) (store.Store, storetest.Extras) {
	ctx := context.Background()
	url := testdb.Postgres(t)
	// Four connections a handle: the suite runs eight tests at once beside
	// other packages on one PostgreSQL (max_connections 100), and its races
	// use four handles, so 16 connections still race for real.
	db, err := open.Open(ctx, url, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	connect := func(t *testing.T) *pgxpool.Pool {
		pool, err := postgres.Connect(ctx, url, 4)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return pool
	}
	raw := connect(t)
	return db.Store, storetest.Extras{
		Dialect: db.Dialect,
		Open: func(t *testing.T, ins jobs.Inserter) store.Store {
			pool := connect(t)
			if ins == nil {
				ins = jobs.NewPostgres(pool).Inserter()
			}
			return postgres.New(pool, ins)
		},
		Int: func(t *testing.T, q string) int64 {
			var n int64
			if err := raw.QueryRow(ctx, q).Scan(&n); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			return n
		},
		Exec: func(t *testing.T, q string) {
			if _, err := raw.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		},
		Migrate: func(ctx context.Context) ([]int, error) { return postgres.Migrate(ctx, raw) },
		Status:  func(ctx context.Context) (sqlstore.MigrationStatus, error) { return postgres.MigrationStatus(ctx, raw) },
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
