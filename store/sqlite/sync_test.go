package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

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
