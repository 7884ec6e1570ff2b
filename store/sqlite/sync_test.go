package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/store/sqlstore"
)

// TestSynchronous: every transaction commits with synchronous=FULL (2), so
// a commit is on disk when it returns, after a failed transaction too.
func TestSynchronous(t *testing.T) {
	ctx := context.Background()
	db, err := Open(filepath.Join(t.TempDir(), "sync.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := Conn(db).(conn)
	setting := func(tx sqlstore.Tx) int64 {
		t.Helper()
		rows, err := tx.Query(ctx, `PRAGMA synchronous`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var n int64
		if !rows.Next() {
			t.Fatal("PRAGMA synchronous returned no row")
		}
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	const full = 2
	check := func(name string, run func(context.Context, func(sqlstore.Tx) error) error, want int64, fail bool) {
		t.Helper()
		boom := errors.New("boom")
		err := run(ctx, func(tx sqlstore.Tx) error {
			if got := setting(tx); got != want {
				t.Errorf("%s: synchronous = %d inside the transaction, want %d", name, got, want)
			}
			if fail {
				return boom
			}
			return nil
		})
		if fail != errors.Is(err, boom) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	check("InTx", c.InTx, full, false)
	check("InTx failing", c.InTx, full, true)
	check("InTx after a failed one", c.InTx, full, false)
}

// TestJobRunnerHandle: the handle a worker's River runs on (OpenJobRunner)
// shares the store's file and WAL but commits without a sync
// (synchronous=NORMAL, 1), while the store's handle keeps FULL (2); each
// sees the other's commits, and the runner's writes take the same
// IMMEDIATE lock and wait for the store's rather than fail.
func TestJobRunnerHandle(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "runner.db")
	storeDB, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer storeDB.Close()
	runner, err := OpenJobRunner(path)
	if err != nil {
		t.Fatal(err)
	}
	defer runner.Close()
	for _, tc := range []struct {
		name        string
		db          *sql.DB
		synchronous int64
	}{
		{"the store's handle", storeDB, 2},
		{"the job runner's handle", runner, 1},
	} {
		var mode string
		var sync int64
		if err := tc.db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if err := tc.db.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync); err != nil {
			t.Fatal(err)
		}
		if mode != "wal" || sync != tc.synchronous {
			t.Errorf("%s: journal_mode %s, synchronous %d; want wal, %d", tc.name, mode, sync, tc.synchronous)
		}
	}
	if _, err := storeDB.ExecContext(ctx, `CREATE TABLE t (v INTEGER)`); err != nil {
		t.Fatal(err)
	}
	// The storeDB holds the write lock while the runner tries to write: the
	// runner waits (busy_timeout) and commits after it.
	tx, err := storeDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := runner.ExecContext(ctx, `INSERT INTO t VALUES (2)`)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the runner wrote while the store held the write lock: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the runner's write after the store's commit: %v", err)
	}
	for name, db := range map[string]*sql.DB{"store": storeDB, "runner": runner} {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil || n != 2 {
			t.Errorf("the %s's handle sees %d rows (%v), want both commits", name, n, err)
		}
	}
}
