package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"modernc.org/sqlite"

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

// TestGroupAborted: a member that ends the shared transaction (here by
// running ROLLBACK itself; a full disk or an I/O error would do the same)
// sits between two members. Whatever SQLite does, every member is told it
// committed exactly when its row is there, and a member undone by another's
// doing is told to run again (ErrRetry), never that it failed on its own.
func TestGroupAborted(t *testing.T) {
	ctx := context.Background()
	r := newGroupRig(t)
	names := []string{"before", "breaker", "after"}
	fns := []func(sqlstore.Tx) error{
		func(tx sqlstore.Tx) error { return insert(ctx, tx, "before") },
		func(tx sqlstore.Tx) error {
			if err := insert(ctx, tx, "breaker"); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `ROLLBACK`)
			return err
		},
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
	if err := r.c.InTx(ctx, func(tx sqlstore.Tx) error { return insert(ctx, tx, "later") }); err != nil || !r.committed("later") {
		t.Fatalf("a transaction after the aborted group: %v", err)
	}
}

// hangUps are the cancel functions test_hang_up(key) calls from inside a
// running statement, so that a context ends mid-write for certain.
var hangUps sync.Map

func init() {
	sqlite.MustRegisterScalarFunction("test_hang_up", 1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		if f, ok := hangUps.LoadAndDelete(args[0]); ok {
			f.(context.CancelFunc)()
		}
		return "", nil
	})
}

// writeHangingUp inserts rows 'slow 1' to 'slow n' on a context that
// test_hang_up ends at the tenth row, and returns what the statement did.
func writeHangingUp(ctx context.Context, tx sqlstore.Tx, n int) (context.Context, error) {
	req, hangUp := context.WithCancel(ctx)
	key := fmt.Sprintf("%p", &req)
	hangUps.Store(key, hangUp)
	_, err := tx.Exec(req, `INSERT INTO rows (who)
		WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
		SELECT 'slow ' || i || CASE WHEN i = 10 THEN test_hang_up(?) ELSE '' END FROM n`, n, key)
	if req.Err() == nil {
		return req, fmt.Errorf("the statement did not end its context (%v)", err)
	}
	return req, err
}

// TestGroupMemberHangsUp: a member whose context ends while its write runs
// (its client hung up) is undone alone, at its next statement, and the
// members around it commit at the first attempt. Interrupting the write
// instead would make SQLite roll back the whole shared transaction, and
// every member would be sent round again for one client's hang-up.
func TestGroupMemberHangsUp(t *testing.T) {
	ctx := context.Background()
	r := newGroupRig(t)
	var slowErr error
	names := []string{"before", "hangs up", "after"}
	fns := []func(sqlstore.Tx) error{
		func(tx sqlstore.Tx) error { return insert(ctx, tx, "before") },
		func(tx sqlstore.Tx) error {
			// Rows enough after the hang-up for an interrupt to land.
			req, err := writeHangingUp(ctx, tx, 20000)
			if slowErr = err; err != nil {
				return err
			}
			return insert(req, tx, "hangs up")
		},
		func(tx sqlstore.Tx) error { return insert(ctx, tx, "after") },
	}
	out := r.runQueued(ctx, fns)
	for i, o := range out {
		if o.panicked != nil {
			t.Fatalf("%s panicked: %v", names[i], o.panicked)
		}
		t.Logf("%s: %v", names[i], o.err)
	}
	if slowErr != nil {
		t.Errorf("the write running when its context ended: %v, want it run to its end", slowErr)
	}
	if err := out[1].err; !errors.Is(err, context.Canceled) || r.committed("hangs up") {
		t.Errorf("the member that hung up: told %v, committed %v; want its context's error, nothing committed", err, r.committed("hangs up"))
	}
	var slowRows int
	if err := r.db.QueryRow(`SELECT count(*) FROM rows WHERE who LIKE 'slow %'`).Scan(&slowRows); err != nil || slowRows != 0 {
		t.Errorf("%d rows of the member that hung up committed (%v)", slowRows, err)
	}
	for _, i := range []int{0, 2} {
		if err := out[i].err; err != nil || !r.committed(names[i]) {
			t.Errorf("%s: told %v, committed %v; want committed at the first attempt", names[i], err, r.committed(names[i]))
		}
	}
	if got := r.c.g.commits; got != 1 {
		t.Errorf("%d shared commits, want 1", got)
	}
	// Alone, a transaction's write is interrupted as before: the mark went
	// with the group. (Rows enough that it cannot end before the interrupt.)
	var aloneErr error
	_ = r.c.InTx(ctx, func(tx sqlstore.Tx) error {
		_, aloneErr = writeHangingUp(ctx, tx, 1_000_000)
		return aloneErr
	})
	if aloneErr == nil {
		t.Error("a write alone after the group ran to its end after its context ended, want it interrupted")
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
