package storetest

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/store/postgres"
	"github.com/hallmark-ca/hallmark/store/sqlite"
	"github.com/hallmark-ca/hallmark/store/sqlstore"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// TestContract holds both dialects to the one suite.
func TestContract(t *testing.T) {
	t.Run("postgres", func(t *testing.T) { t.Parallel(); Run(t, newPostgres) })
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); Run(t, newSQLite) })
}

// newPostgres opens a fresh database the way the binaries do (open.Open,
// then Hallmark's and River's migrations) and gives the suite its extras
// through handles of their own.
func newPostgres(t *testing.T) (store.Store, Extras) {
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
	return db.Store, Extras{
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

// newSQLite opens a fresh file the way the binaries do. Every extra handle
// is a separate *sql.DB with its own single connection: a separate
// process, as far as SQLite's locking is concerned.
func newSQLite(t *testing.T) (store.Store, Extras) {
	ctx := context.Background()
	url := testdb.SQLite(t)
	db, err := open.Open(ctx, url, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	path := strings.TrimPrefix(url, "sqlite:")
	connect := func(t *testing.T) *sql.DB {
		h, err := sqlite.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h
	}
	raw := connect(t)
	return db.Store, Extras{
		Dialect:       db.Dialect,
		ProcessNonces: true,
		Open: func(t *testing.T, ins jobs.Inserter) store.Store {
			h := connect(t)
			if ins == nil {
				ins = jobs.NewSQLite(h).Inserter()
			}
			return sqlite.New(h, ins)
		},
		Int: func(t *testing.T, q string) int64 {
			var n int64
			if err := raw.QueryRowContext(ctx, q).Scan(&n); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			return n
		},
		Exec: func(t *testing.T, q string) {
			if _, err := raw.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		},
		Migrate: func(ctx context.Context) ([]int, error) { return sqlite.Migrate(ctx, raw) },
		Status:  func(ctx context.Context) (sqlstore.MigrationStatus, error) { return sqlite.MigrationStatus(ctx, raw) },
	}
}
