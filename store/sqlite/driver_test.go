package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/hallmark-ca/hallmark/store/sqlstore"
)

// TestStmtCache: the connection keeps statements prepared once seen,
// inside transactions and out, and they mean what they meant: a
// transaction sees its own writes through them, a rollback undoes them, a
// constraint violation is still one, a script of several statements runs
// whole every time, and a statement run again while its rows are open
// still works.
func TestStmtCache(t *testing.T) {
	ctx := context.Background()
	db, err := Open(filepath.Join(t.TempDir(), "cache.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := Conn(db).(conn)
	// inspect looks at the handle's one connection between statements.
	inspect := func(fn func(cc *cachingConn)) {
		t.Helper()
		sc, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		if err := sc.Raw(func(dc any) error {
			cc := dc.(*cachingConn)
			cc.mu.Lock()
			defer cc.mu.Unlock()
			fn(cc)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	cached := func(q string) (ok bool) {
		inspect(func(cc *cachingConn) { ok = cc.stmts[q] != nil })
		return ok
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
	// A script without arguments, run twice from the cache, runs whole
	// each time (and the first script created u as well as t).
	const script = "INSERT INTO u (k) VALUES ('x'); INSERT INTO u (k) VALUES ('y')"
	for range 2 {
		if err := c.InTx(ctx, func(tx sqlstore.Tx) error {
			_, err := tx.Exec(ctx, script)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	var inU int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM u").Scan(&inU); err != nil || inU != 4 {
		t.Fatalf("the cached two-statement script, run twice, left %d rows (%v), want 4", inU, err)
	}
	if !cached(script) {
		t.Error("a script without arguments was not kept prepared")
	}
	var n, prepares int
	inspect(func(cc *cachingConn) { n, prepares = len(cc.stmts), cc.prepares })
	// The two scripts, insert, count and the count of u: each prepared once.
	if n != 5 || prepares != 5 {
		t.Errorf("%d statements cached after %d prepares, want 5 and 5 (each prepared once)", n, prepares)
	}
	// The same statement again while its rows are open (on the one
	// connection, so in a transaction): the second runs unprepared, and
	// both read what they should.
	if err := c.InTx(ctx, func(tx sqlstore.Tx) error {
		outer, err := tx.Query(ctx, count, "")
		if err != nil {
			return err
		}
		defer outer.Close()
		if got := countIn(tx); got != 2 {
			t.Errorf("nested count = %d, want 2", got)
		}
		var m int
		if !outer.Next() {
			return errors.New("outer count has no row")
		}
		if err := outer.Scan(&m); err != nil || m != 2 {
			t.Errorf("outer count = %d, %v; want 2", m, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
