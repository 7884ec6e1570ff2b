package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/hallmark-ca/hallmark/store/sqlstore"
)

// TestStmtCache: statements with arguments run prepared once seen —
// inside a transaction from the next one on, outside at once — and mean
// what they meant: a transaction sees its own writes through them, a
// rollback undoes them, and a script without arguments still runs whole.
func TestStmtCache(t *testing.T) {
	ctx := context.Background()
	db, err := Open(filepath.Join(t.TempDir(), "cache.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := Conn(db).(conn)
	cached := func(q string) bool {
		c.stmts.mu.Lock()
		defer c.stmts.mu.Unlock()
		return c.stmts.m[q] != nil
	}
	// A script of two statements without arguments (as a migration is).
	if err := c.InTx(ctx, func(tx sqlstore.Tx) error {
		_, err := tx.Exec(ctx, "CREATE TABLE t (k text PRIMARY KEY); CREATE TABLE u (k text)")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	const insert = "INSERT INTO t (k) VALUES (?1)"
	const count = "SELECT count(*) FROM t WHERE k >= ?1"
	countIn := func(tx sqlstore.Tx) (n int) {
		rows, err := tx.Query(ctx, count, "")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		rows.Next()
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	errRollback := errors.New("roll back")
	for i, k := range []string{"a", "b", "c"} {
		err := c.InTx(ctx, func(tx sqlstore.Tx) error {
			if _, err := tx.Exec(ctx, insert, k); err != nil {
				return err
			}
			if got := countIn(tx); got != i+1 {
				t.Errorf("transaction %d sees %d rows, want %d", i, got, i+1)
			}
			if k == "c" {
				return errRollback
			}
			return nil
		})
		if k == "c" && !errors.Is(err, errRollback) || k != "c" && err != nil {
			t.Fatalf("transaction %d: %v", i, err)
		}
		if !cached(insert) || !cached(count) {
			t.Fatalf("after transaction %d the statements are not prepared", i)
		}
	}
	if err := c.Autocommit(ctx, func(tx sqlstore.Tx) error {
		if got := countIn(tx); got != 2 {
			t.Errorf("%d rows after the rolled-back insert, want 2", got)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.InTx(ctx, func(tx sqlstore.Tx) error {
		_, err := tx.Exec(ctx, insert, "a")
		return err
	}); c.Classify(err) != sqlstore.ErrUnique {
		t.Errorf("a duplicate through a prepared statement = %v, want a unique violation", err)
	}
	if len(c.stmts.m) != 2 {
		t.Errorf("%d statements cached, want 2 (none without arguments)", len(c.stmts.m))
	}
}
