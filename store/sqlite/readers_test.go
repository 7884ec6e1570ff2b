package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/store/sqlstore"
)

func TestReadOnly(t *testing.T) {
	for _, c := range []struct {
		q    string
		want bool
	}{
		{"SELECT 1", true},
		{"  \n\tselect id FROM orders", true},
		{"WITH x AS (SELECT 1) SELECT * FROM x", false}, // could end in a write: the writer's
		{"WITH x AS (SELECT 1) DELETE FROM t WHERE k IN x", false},
		{"INSERT INTO t VALUES (1) RETURNING k", false},
		{"UPDATE t SET k = 1 RETURNING k", false},
		{"DELETE FROM t RETURNING k", false},
		{"PRAGMA data_version", false},
		{"-- SELECT\nDELETE FROM t", false},
		{"SELEC", false},
		{"", false},
	} {
		if got := readOnly(c.q); got != c.want {
			t.Errorf("readOnly(%q) = %v, want %v", c.q, got, c.want)
		}
	}
}

// readersRig is a store connection on a fresh file with the read-only
// pool, and a table to read and write.
func readersRig(t *testing.T, withReaders bool) conn {
	t.Helper()
	path := filepath.Join(t.TempDir(), "readers.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	c := conn{db: db, g: newGroup(db)}
	if withReaders {
		if c.rd, err = OpenReaders(path); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { c.Close() })
	if _, err := db.Exec("CREATE TABLE t (k INTEGER PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	return c
}

func autoQueryInt(ctx context.Context, c conn, q string, args ...any) (n int64, err error) {
	err = c.Autocommit(ctx, func(tx sqlstore.Tx) error {
		rows, err := tx.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		if !rows.Next() {
			return rows.Err()
		}
		return rows.Scan(&n)
	})
	return n, err
}

// TestReadersDoNotQueueBehindWrites: an autocommitted SELECT completes
// while a write transaction holds the store's one write connection, and
// sees the last committed state, not the open transaction's. Without the
// read-only pool the same read waits for the transaction to end.
func TestReadersDoNotQueueBehindWrites(t *testing.T) {
	for _, withReaders := range []bool{true, false} {
		name := "with readers"
		if !withReaders {
			name = "one connection"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := readersRig(t, withReaders)
			inTx, release, txDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			go func() {
				txDone <- c.InTx(ctx, func(tx sqlstore.Tx) error {
					if _, err := tx.Exec(ctx, "INSERT INTO t (k) VALUES (1)"); err != nil {
						return err
					}
					close(inTx)
					<-release
					return nil
				})
			}()
			<-inTx
			type result struct {
				n   int64
				err error
			}
			read := make(chan result, 1)
			go func() {
				n, err := autoQueryInt(ctx, c, "SELECT count(*) FROM t")
				read <- result{n, err}
			}()
			if withReaders {
				select {
				case r := <-read:
					if r.err != nil || r.n != 0 {
						t.Errorf("read during the write: %d rows, %v; want 0 (the write is not committed)", r.n, r.err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("the read waited for the write transaction")
				}
				close(release)
			} else {
				select {
				case r := <-read:
					t.Fatalf("the read ran on the one connection a transaction holds: %+v", r)
				case <-time.After(100 * time.Millisecond): // it cannot: the connection is taken
				}
				close(release)
				if r := <-read; r.err != nil || r.n != 1 {
					t.Errorf("read after the write: %d rows, %v; want 1", r.n, r.err)
				}
			}
			if err := <-txDone; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestReadersSeeEveryCommit: each write committed on the writer is seen by
// the next autocommitted read, on whichever reader connection it runs.
func TestReadersSeeEveryCommit(t *testing.T) {
	ctx := context.Background()
	c := readersRig(t, true)
	for i := int64(1); i <= 300; i++ {
		if err := c.InTx(ctx, func(tx sqlstore.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO t (k) VALUES (?1)", i)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if n, err := autoQueryInt(ctx, c, "SELECT max(k) FROM t"); err != nil || n != i {
			t.Fatalf("after committing %d the read saw %d (%v)", i, n, err)
		}
	}
}

// TestReadersWriteNothing: a write that reaches the read-only pool fails
// rather than taking the write lock outside the store's ordering, and an
// autocommitted write with RETURNING, which is not a SELECT, runs on the
// writer.
func TestReadersWriteNothing(t *testing.T) {
	ctx := context.Background()
	c := readersRig(t, true)
	if _, err := c.rd.ExecContext(ctx, "INSERT INTO t (k) VALUES (7)"); err == nil || !strings.Contains(err.Error(), "readonly") {
		t.Errorf("a write on the read-only pool: %v, want a readonly error", err)
	}
	if n, err := autoQueryInt(ctx, c, "INSERT INTO t (k) VALUES (8) RETURNING k"); err != nil || n != 8 {
		t.Errorf("INSERT ... RETURNING in autocommit: %d, %v; want 8", n, err)
	}
	if n, err := autoQueryInt(ctx, c, "SELECT count(*) FROM t"); err != nil || n != 1 {
		t.Errorf("%d rows, %v; want the one RETURNING wrote", n, err)
	}
}
