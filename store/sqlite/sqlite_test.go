package sqlite_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/store/sqlite"
	"github.com/hallmark-ca/hallmark/store/sqlstore"
	"github.com/hallmark-ca/hallmark/store/storetest"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

func TestContract(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { storetest.Run(t, newStore) })
}

// newStore opens a fresh file the way the binaries do (open.Open, then
// Hallmark's and River's migrations). Every extra handle is a separate
// *sql.DB with its own single connection: a separate process, as far as
// SQLite's locking is concerned.
func newStore(t *testing.T) (store.Store, storetest.Extras) {
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
	return db.Store, storetest.Extras{
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
