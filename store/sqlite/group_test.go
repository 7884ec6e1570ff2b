package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/store/sqlstore"
)

// groupRig is a handle with a table of rows, one per transaction that
// committed, and a way to make transactions queue behind one that holds
// the connection until they have.
type groupRig struct {
	t  *testing.T
	db *sql.DB
	c  conn
}

func newGroupRig(t *testing.T) *groupRig {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "group.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE rows (who TEXT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	return &groupRig{t: t, db: db, c: Conn(db).(conn)}
}

func (r *groupRig) queued() int {
	r.c.g.mu.Lock()
	defer r.c.g.mu.Unlock()
	return len(r.c.g.queue)
}

func (r *groupRig) waitQueued(n int) {
	r.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); r.queued() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			r.t.Fatalf("%d transactions queued, want %d", r.queued(), n)
		}
	}
}

func (r *groupRig) committed(who string) bool {
	r.t.Helper()
	var n int
	if err := r.db.QueryRow(`SELECT count(*) FROM rows WHERE who = ?`, who).Scan(&n); err != nil {
		r.t.Fatal(err)
	}
	return n == 1
}

func insert(ctx context.Context, tx sqlstore.Tx, who string) error {
	_, err := tx.Exec(ctx, `INSERT INTO rows (who) VALUES (?)`, who)
	return err
}

// outcome is what one InTx call returned, or the panic it raised.
type outcome struct {
	err      error
	panicked any
}

// hold starts a transaction that holds the connection, so that others
// queue behind it, and returns release, which lets it commit and waits.
func (r *groupRig) hold(ctx context.Context) (release func()) {
	r.t.Helper()
	let, held := make(chan struct{}), make(chan struct{})
	holder := make(chan error, 1)
	go func() {
		holder <- r.c.InTx(ctx, func(tx sqlstore.Tx) error {
			close(held)
			<-let
			return insert(ctx, tx, "holder")
		})
	}()
	<-held
	return func() {
		r.t.Helper()
		close(let)
		if err := <-holder; err != nil {
			r.t.Fatalf("the transaction holding the connection: %v", err)
		}
	}
}

// runQueued holds the connection while fns queue behind it, one after
// another in order, then lets them run; it returns each one's outcome.
func (r *groupRig) runQueued(ctx context.Context, fns []func(sqlstore.Tx) error) []outcome {
	r.t.Helper()
	release := r.hold(ctx)
	out := make([]outcome, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { out[i].panicked = recover() }()
			out[i].err = r.c.InTx(ctx, fn)
		}()
		r.waitQueued(i + 1)
	}
	release()
	wg.Wait()
	return out
}

// TestGroupCommit: transactions that queue while another holds the
// connection share one commit, and each one that fails, by its own error,
// a constraint or a panic, is undone alone and told so; the rest commit.
func TestGroupCommit(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("boom")
	// Every member writes its row, then does what its kind does.
	members := []struct {
		name    string
		then    func(tx sqlstore.Tx) error
		commits bool
		check   func(outcome) error
	}{
		{"commits", func(sqlstore.Tx) error { return nil }, true, nil},
		{"returns an error after writing", func(sqlstore.Tx) error { return boom }, false, func(o outcome) error {
			if !errors.Is(o.err, boom) {
				return fmt.Errorf("got %v, want its own error", o.err)
			}
			return nil
		}},
		{"breaks a constraint after writing", func(tx sqlstore.Tx) error { return insert(ctx, tx, "holder") }, false, func(o outcome) error {
			if (conn{}).Classify(o.err) != sqlstore.ErrUnique {
				return fmt.Errorf("got %v, want a unique violation", o.err)
			}
			return nil
		}},
		{"panics after writing", func(sqlstore.Tx) error { panic("boom") }, false, func(o outcome) error {
			if o.panicked != "boom" {
				return fmt.Errorf("panicked with %v, want the transaction's own panic raised in its caller", o.panicked)
			}
			return nil
		}},
	}
	r := newGroupRig(t)
	// Each kind twice, interleaved, so a failure sits between members
	// that commit.
	var fns []func(sqlstore.Tx) error
	var names []string
	for round := range 2 {
		for _, m := range members {
			who := fmt.Sprintf("%s #%d", m.name, round)
			fn := func(tx sqlstore.Tx) error {
				if err := insert(ctx, tx, who); err != nil {
					return err
				}
				return m.then(tx)
			}
			fns, names = append(fns, fn), append(names, who)
		}
	}
	out := r.runQueued(ctx, fns)
	for i, o := range out {
		m := members[i%len(members)]
		if got := r.committed(names[i]); got != m.commits {
			t.Errorf("%s: committed %v, want %v", names[i], got, m.commits)
		}
		if m.check == nil {
			if o.err != nil || o.panicked != nil {
				t.Errorf("%s: %v %v, want nil", names[i], o.err, o.panicked)
			}
		} else if err := m.check(o); err != nil {
			t.Errorf("%s: %v", names[i], err)
		}
	}
	if got := r.c.g.commits; got != 1 {
		t.Errorf("%d shared commits for %d queued transactions, want 1", got, len(fns))
	}
	// The handle is as it was: a transaction after them commits alone.
	if err := r.c.InTx(ctx, func(tx sqlstore.Tx) error { return insert(ctx, tx, "after") }); err != nil || !r.committed("after") {
		t.Fatalf("a transaction after the group: %v", err)
	}
}

// TestGroupAborted: a member that ends the shared transaction, by a write
// interrupted because its context ended (SQLite then rolls the whole
// transaction back, not the statement) or by ending it outright, sits
// between two members. Whatever SQLite does, every member is told it
// committed exactly when its row is there, and a member undone by
// another's doing is told to run again (ErrRetry), never that it failed on
// its own.
func TestGroupAborted(t *testing.T) {
	ctx := context.Background()
	// Rows enough to take seconds, so that the cancel lands mid-statement.
	const long = `INSERT INTO rows (who) WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000000) SELECT 'slow ' || i FROM n`
	breakers := []struct {
		name string
		fn   func(sqlstore.Tx) error
	}{
		{"interrupted write", func(tx sqlstore.Tx) error {
			slow, cancel := context.WithCancel(ctx)
			defer cancel()
			time.AfterFunc(50*time.Millisecond, cancel)
			_, err := tx.Exec(slow, long)
			if err == nil {
				return errors.New("the interrupted statement succeeded")
			}
			return err
		}},
		{"ends the transaction and says nothing", func(tx sqlstore.Tx) error {
			if err := insert(ctx, tx, "breaker"); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `ROLLBACK`)
			return err
		}},
	}
	for _, b := range breakers {
		t.Run(b.name, func(t *testing.T) {
			r := newGroupRig(t)
			names := []string{"before", "breaker", "after"}
			fns := []func(sqlstore.Tx) error{
				func(tx sqlstore.Tx) error { return insert(ctx, tx, "before") },
				b.fn,
				func(tx sqlstore.Tx) error { return insert(ctx, tx, "after") },
			}
			out := r.runQueued(ctx, fns)
			for i, o := range out {
				if o.panicked != nil {
					t.Fatalf("%s panicked: %v", names[i], o.panicked)
				}
				if committed := r.committed(names[i]); committed != (o.err == nil) {
					t.Errorf("%s: told %v, committed %v", names[i], o.err, committed)
				}
				if i != 1 && o.err != nil && r.c.Classify(o.err) != sqlstore.ErrRetry {
					t.Errorf("%s: undone by another's doing, told %v, which is not to be retried", names[i], o.err)
				}
				t.Logf("%s: %v", names[i], o.err)
			}
			var slowRows int
			if err := r.db.QueryRow(`SELECT count(*) FROM rows WHERE who LIKE 'slow %'`).Scan(&slowRows); err != nil || slowRows != 0 {
				t.Fatalf("%d rows of the interrupted statement committed (%v)", slowRows, err)
			}
			if err := r.c.InTx(ctx, func(tx sqlstore.Tx) error { return insert(ctx, tx, "later") }); err != nil || !r.committed("later") {
				t.Fatalf("a transaction after the aborted group: %v", err)
			}
		})
	}
}

// TestGroupWithdraw: a transaction whose context ends while it waits in
// the queue returns at once with the context's error and never runs, as
// it would have waiting for the connection; the queue behind it runs on.
func TestGroupWithdraw(t *testing.T) {
	ctx := context.Background()
	r := newGroupRig(t)
	release := r.hold(ctx)
	quit, cancel := context.WithCancel(ctx)
	defer cancel()
	ran := make(chan struct{}, 1)
	gaveUp := make(chan error, 1)
	go func() {
		gaveUp <- r.c.InTx(quit, func(tx sqlstore.Tx) error {
			ran <- struct{}{}
			return insert(ctx, tx, "gave up")
		})
	}()
	r.waitQueued(1)
	stays := make(chan error, 1)
	go func() { stays <- r.c.InTx(ctx, func(tx sqlstore.Tx) error { return insert(ctx, tx, "stays") }) }()
	r.waitQueued(2)
	cancel()
	select {
	case err := <-gaveUp:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the withdrawn transaction returned %v, want its context's error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a transaction whose context ended stayed queued behind the one holding the connection")
	}
	if n := r.queued(); n != 1 {
		t.Fatalf("%d transactions queued after one withdrew, want 1", n)
	}
	release()
	if err := <-stays; err != nil || !r.committed("stays") {
		t.Fatalf("the transaction queued behind the withdrawn one: %v", err)
	}
	select {
	case <-ran:
		t.Fatal("the withdrawn transaction ran")
	default:
	}
	if r.committed("gave up") {
		t.Fatal("the withdrawn transaction committed")
	}
}
