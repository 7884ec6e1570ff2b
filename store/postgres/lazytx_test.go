package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/hallmark-ca/hallmark/store/postgres"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// roundTrips counts what a connection sends: each statement sent alone and
// each batch.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// riverNotify has the name River's insert notification (PGNotifyMany)
// starts with, which lazyTx holds back for COMMIT; TestRiverNotifyHeld
// checks River's own statement is held.
const riverNotify = "-- name: PGNotifyMany :exec\nSELECT pg_notify($1, $2)"

// wantNotification waits briefly for a notification on conn: payload, or
// none when payload is "".
func wantNotification(ctx context.Context, conn *pgx.Conn, payload string) error {
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	n, err := conn.WaitForNotification(wctx)
	switch {
	case payload == "" && err == nil:
		return fmt.Errorf("notification %q from a transaction that did not commit", n.Payload)
	case payload == "":
		return nil
	case err != nil:
		return fmt.Errorf("no notification %q after the commit: %w", payload, err)
	case n.Payload != payload:
		return fmt.Errorf("notification %q, want %q", n.Payload, payload)
	}
	return nil
}

// tracedConn is a connection to a fresh database that counts its round
// trips, closed when the test ends, and a context for the test.
func tracedConn(t *testing.T) (context.Context, *pgx.Conn, *roundTrips) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cfg, err := pgx.ParseConfig(testdb.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	rt := &roundTrips{}
	cfg.Tracer = rt
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return ctx, conn, rt
}

// TestLazyTx: BEGIN rides with the first statement (one round trip fewer
// than pgx's Begin), and the transaction means what a transaction means:
// commit keeps both statements, rollback and a failed first statement keep
// neither, savepoints work, an untouched transaction sends nothing.
func TestLazyTx(t *testing.T) {
	t.Parallel()
	ctx, conn, rt := tracedConn(t)
	if _, err := conn.Exec(ctx, `CREATE TABLE t (k text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `LISTEN lazytx`); err != nil {
		t.Fatal(err)
	}
	count := func() (n int) {
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// insertABC sends two INSERTs in one batch with send, the second with
	// suffix appended, and checks each one's result in order.
	insertABC := func(send func(context.Context, *pgx.Batch) pgx.BatchResults, suffix string) error {
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO t VALUES ('a')`)
		b.Queue(`INSERT INTO t VALUES ('b'), ('c')` + suffix)
		br := send(ctx, b)
		if tag, err := br.Exec(); err != nil || tag.RowsAffected() != 1 {
			_ = br.Close()
			return errors.Join(err, fmt.Errorf("first result %v, want the first INSERT's", tag))
		}
		if tag, err := br.Exec(); err != nil || tag.RowsAffected() != 2 {
			_ = br.Close()
			return errors.Join(err, fmt.Errorf("second result %v, want the second INSERT's", tag))
		}
		return br.Close()
	}
	// held inserts a row, sends a notification of payload (with where
	// appended) that lazyTx holds for COMMIT, ends the transaction with
	// end, and expects the notification delivered ("" for none).
	held := func(where, payload string, end func(pgx.Tx) error, delivered string) func(pgx.Tx) error {
		return func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO t VALUES ('a')`); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, riverNotify+where, "lazytx", payload); err != nil {
				return err
			}
			if err := end(tx); err != nil {
				return err
			}
			return wantNotification(ctx, conn, delivered)
		}
	}
	// ahead holds an INSERT of key to go in front of the next statement
	// (sendAhead); read counts the times its result was read, and fails
	// on a result other than the INSERT's.
	var read int
	ahead := func(tx pgx.Tx, key string) {
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO t VALUES ($1)`, key)
		postgres.SendAhead(tx, b, func(br pgx.BatchResults) error {
			read++
			tag, err := br.Exec()
			if err == nil && tag.RowsAffected() != 1 {
				err = fmt.Errorf("result %v, want the INSERT's", tag)
			}
			return err
		})
	}
	// aheadThen holds key's INSERT ahead, then runs next, and wants the
	// held result read exactly once by then.
	aheadThen := func(key string, next func(tx pgx.Tx) error) func(pgx.Tx) error {
		return func(tx pgx.Tx) error {
			read = 0
			ahead(tx, key)
			err := next(tx)
			if read != 1 && err == nil {
				err = fmt.Errorf("the held statement's result was read %d times, want once", read)
			}
			return err
		}
	}
	execB := func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO t VALUES ('b')`)
		return err
	}
	tests := []struct {
		name  string
		run   func(tx pgx.Tx) error
		trips int64 // round trips, COMMIT or ROLLBACK included
		rows  int   // rows in t afterwards (each case starts empty)
	}{
		{"exec, exec, commit", func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO t VALUES ('a')`); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO t VALUES ('b')`); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}, 3, 2},
		{"query first, then exec, rollback", func(tx pgx.Tx) error {
			var k string
			if err := tx.QueryRow(ctx, `INSERT INTO t VALUES ('a') RETURNING k`).Scan(&k); err != nil || k != "a" {
				return errors.Join(err, errors.New("RETURNING did not come back"))
			}
			if _, err := tx.Exec(ctx, `INSERT INTO t VALUES ('b')`); err != nil {
				return err
			}
			return tx.Rollback(ctx)
		}, 3, 0},
		{"first statement fails running", func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (NULL)`); err == nil {
				return errors.New("a NULL key was inserted")
			}
			if err := tx.Commit(ctx); !errors.Is(err, pgx.ErrTxCommitRollback) {
				return fmt.Errorf("commit of a failed transaction = %v, want ErrTxCommitRollback", err)
			}
			return nil
		}, 2, 0},
		// pgx prepares a batch's statements before running any; one that
		// cannot be prepared fails the batch before BEGIN runs.
		{"first statement cannot be prepared", func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO nosuchtable VALUES (1)`); err == nil {
				return errors.New("insert into a missing table succeeded")
			}
			if err := tx.Commit(ctx); err == nil {
				return errors.New("a failed transaction committed")
			}
			return nil
		}, 1, 0},
		{"savepoint", func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO t VALUES ('a')`); err != nil {
				return err
			}
			sp, err := tx.Begin(ctx)
			if err != nil {
				return err
			}
			if _, err := sp.Exec(ctx, `INSERT INTO t VALUES ('a')`); err == nil {
				return errors.New("duplicate key accepted")
			}
			if err := sp.Rollback(ctx); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}, 5, 1},
		{"batch first: BEGIN rides in it", func(tx pgx.Tx) error {
			if err := insertABC(tx.SendBatch, ``); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}, 2, 3},
		{"batch first fails in the middle", func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			b.Queue(`INSERT INTO t VALUES ('a')`)
			b.Queue(`INSERT INTO t VALUES ('a')`)
			b.Queue(`INSERT INTO t VALUES ('b')`)
			if err := tx.SendBatch(ctx, b).Close(); err == nil {
				return errors.New("a duplicate key in a batch was accepted")
			}
			if err := tx.Commit(ctx); !errors.Is(err, pgx.ErrTxCommitRollback) {
				return fmt.Errorf("commit of a failed transaction = %v, want ErrTxCommitRollback", err)
			}
			return nil
		}, 2, 0},
		{"exec, then batch", func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO t VALUES ('a')`); err != nil {
				return err
			}
			b := &pgx.Batch{}
			b.Queue(`INSERT INTO t VALUES ('b')`)
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}, 3, 2},
		{"untouched", func(tx pgx.Tx) error { return tx.Commit(ctx) }, 0, 0},
		{"last batch carries COMMIT", func(tx pgx.Tx) error {
			commitWith := func(ctx context.Context, b *pgx.Batch) pgx.BatchResults { return postgres.CommitWith(ctx, tx, b) }
			if err := insertABC(commitWith, ` RETURNING k`); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO t VALUES ('d')`); !errors.Is(err, pgx.ErrTxClosed) {
				return fmt.Errorf("a statement after the COMMIT = %v, want ErrTxClosed", err)
			}
			return tx.Commit(ctx) // nothing left to send
		}, 1, 3},
		{"last batch fails: no COMMIT, rollback", func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			b.Queue(`INSERT INTO t VALUES ('a')`)
			b.Queue(`INSERT INTO t VALUES ('a')`)
			if err := postgres.CommitWith(ctx, tx, b).Close(); err == nil {
				return errors.New("a duplicate key in the last batch was accepted")
			}
			return tx.Rollback(ctx)
		}, 2, 0},
		{"a held statement goes out with COMMIT", held("", "held", func(tx pgx.Tx) error { return tx.Commit(ctx) }, "held"), 2, 1},
		{"a held statement is dropped by rollback", held("", "dropped", func(tx pgx.Tx) error { return tx.Rollback(ctx) }, ""), 2, 0},
		{"a held statement that fails fails the commit", held(` WHERE 1/0 = 1`, "never", func(tx pgx.Tx) error {
			if err := tx.Commit(ctx); err == nil {
				return errors.New("the commit succeeded though a held statement failed")
			}
			return tx.Rollback(ctx)
		}, ""), 3, 0},
		{"a statement held ahead rides with BEGIN and the next", aheadThen("a", func(tx pgx.Tx) error {
			if err := execB(tx); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}), 2, 2},
		{"held ahead after BEGIN, in front of a query", func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO t VALUES ('c')`); err != nil {
				return err
			}
			return aheadThen("a", func(tx pgx.Tx) error {
				var n int
				if err := tx.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil || n != 2 {
					return errors.Join(err, fmt.Errorf("the query saw %d rows, want 2: the held INSERT runs first", n))
				}
				return tx.Commit(ctx)
			})(tx)
		}, 3, 2},
		{"held ahead fails: its error is the next statement's, which does not run", func(tx pgx.Tx) error {
			read = 0
			ahead(tx, "a")
			ahead(tx, "a")
			_, err := tx.Exec(ctx, `INSERT INTO t VALUES ('b')`)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
				return fmt.Errorf("the statement after a held duplicate INSERT = %v, want the duplicate's unique violation", err)
			}
			if read != 2 {
				return fmt.Errorf("held results read %d times, want 2", read)
			}
			return tx.Rollback(ctx)
		}, 2, 0},
		{"held ahead, then nothing: it goes with COMMIT", aheadThen("a", func(tx pgx.Tx) error { return tx.Commit(ctx) }), 1, 1},
		{"held ahead, then rollback: never sent", func(tx pgx.Tx) error {
			read = 0
			ahead(tx, "a")
			if err := tx.Rollback(ctx); err != nil {
				return err
			}
			if read != 0 {
				return fmt.Errorf("a dropped statement's result was read %d times", read)
			}
			return nil
		}, 0, 0},
	}
	for _, tc := range tests {
		if _, err := conn.Exec(ctx, `TRUNCATE t`); err != nil {
			t.Fatal(err)
		}
		before := rt.n.Load()
		tx := postgres.NewLazyTx(conn)
		if err := tc.run(tx); err != nil {
			t.Errorf("%s: %v", tc.name, err)
			_ = tx.Rollback(ctx)
			continue
		}
		if got := rt.n.Load() - before; got != tc.trips {
			t.Errorf("%s: %d round trips, want %d", tc.name, got, tc.trips)
		}
		if got := count(); got != tc.rows {
			t.Errorf("%s: %d rows afterwards, want %d", tc.name, got, tc.rows)
		}
		if err := tx.Commit(ctx); !errors.Is(err, pgx.ErrTxClosed) {
			t.Errorf("%s: a second Commit = %v, want ErrTxClosed", tc.name, err)
		}
	}
}

// TestRiverNotifyHeld: River's own insert notification, sent through its
// pgx driver on a lazyTx, costs no round trip of its own and is delivered
// when the transaction commits. It fails if River renames the statement
// lazyTx recognises.
func TestRiverNotifyHeld(t *testing.T) {
	t.Parallel()
	ctx, conn, rt := tracedConn(t)
	driver := riverpgxv5.New(nil)
	params := &riverdriver.NotifyManyParams{Topic: "river_insert", Payload: []string{`{"queue": "held"}`}, Schema: "public"}
	// River learns the server's capabilities once per driver, with a
	// query of its own; let it, outside the transaction measured.
	warm := postgres.NewLazyTx(conn)
	if err := driver.UnwrapExecutor(warm).NotifyMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	if err := warm.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `LISTEN "public.river_insert"`); err != nil {
		t.Fatal(err)
	}

	tx := postgres.NewLazyTx(conn)
	if _, err := tx.Exec(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	before := rt.n.Load()
	if err := driver.UnwrapExecutor(tx).NotifyMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	if got := rt.n.Load() - before; got != 0 {
		t.Fatalf("River's notification took %d round trips of its own, want 0 (held for COMMIT)", got)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rt.n.Load() - before; got != 1 {
		t.Fatalf("the notification and COMMIT took %d round trips, want 1", got)
	}
	if err := wantNotification(ctx, conn, `{"queue": "held"}`); err != nil {
		t.Fatal(err)
	}
}
