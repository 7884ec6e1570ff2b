package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/hallmark-ca/hallmark/store/sqlstore"
)

// Group commit. A process has one connection to the file, so its write
// transactions run one after another, and each commit waits for a sync of
// the WAL (synchronous=FULL) while holding SQLite's write lock, which the
// other process (frontend or worker) then waits for. With many requests at
// once those syncs are what a busy SQLite CA waits on (a quarter of the
// throughput at 32 concurrent issuances). Durability stays; the syncs are
// shared instead. Transactions that queue while
// another commits run together, the next time the connection is free, in
// one transaction with one commit and one sync, each inside a savepoint of
// its own so that one that fails is undone alone (PostgreSQL does the same
// for concurrent commits in its WAL flush).
//
// A transaction that finds nobody running runs alone, as before, so one
// request at a time pays nothing for this.

// maxGroup bounds how many transactions share a commit: the last one's
// caller waits for all before it.
const maxGroup = 32

// errGroupAborted is what a transaction is told when its group's shared
// transaction failed for something that was not its own doing (another
// member's statement that made SQLite roll the whole transaction back, or
// the commit). Nothing of it was committed; it is safe to run again, and
// the store does (Classify: sqlstore.ErrRetry).
var errGroupAborted = errors.New("the shared SQLite transaction this one ran in was rolled back; nothing of it was committed")

// group is the queue of one handle's write transactions.
type group struct {
	db *sql.DB

	mu      sync.Mutex
	queue   []*member
	leading bool // some member is running a group; the rest wait for it

	commits int // groups committed with more than one member, for tests
}

// member is one InTx call: its work, and what became of it.
type member struct {
	ctx  context.Context
	fn   func(sqlstore.Tx) error
	lead chan struct{} // closed to make this member the next leader
	done chan struct{} // closed when err (or panicked) is final

	err      error
	panicked any // a panic in fn, raised again in the caller's goroutine
}

func newGroup(db *sql.DB) *group { return &group{db: db} }

// inTx runs fn in a transaction, alone or in a group, and returns once its
// work is committed or undone.
func (g *group) inTx(ctx context.Context, fn func(sqlstore.Tx) error) error {
	m := &member{ctx: ctx, fn: fn, lead: make(chan struct{}), done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, m)
	first := !g.leading
	g.leading = true
	g.mu.Unlock()
	if first {
		g.run()
	} else {
		select {
		case <-m.done:
		case <-m.lead:
			g.run()
		case <-ctx.Done():
			// Given up while waiting, as a caller waiting for the
			// connection would: unless its turn has come already.
			if g.withdraw(m) {
				return ctx.Err()
			}
			select {
			case <-m.done:
			case <-m.lead:
				g.run()
			}
		}
	}
	<-m.done
	if m.panicked != nil {
		panic(m.panicked)
	}
	return m.err
}

// withdraw takes m out of the queue if nothing has been asked of it yet:
// not taken into a group, and not made the next leader (whose lead must
// not be lost with it).
func (g *group) withdraw(m *member) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-m.lead:
		return false
	default:
	}
	i := slices.Index(g.queue, m)
	if i < 0 {
		return false
	}
	g.queue = slices.Delete(g.queue, i, i+1) // after any batch taken, never in it
	return true
}

// run takes the queue (up to maxGroup) and runs it, then hands the lead to
// the first member still waiting, or gives it up. The leader's own work is
// in what it takes, and the lead passes on at once, so no caller runs other
// callers' transactions for longer than one group.
func (g *group) run() {
	g.mu.Lock()
	n := min(len(g.queue), maxGroup)
	batch := g.queue[:n:n]
	g.queue = g.queue[n:] // appends go after batch, never over it
	if len(g.queue) == 0 {
		g.queue = nil
	}
	g.mu.Unlock()

	// Handed on even if runGroup panics outside a member's work, or every
	// later transaction would wait for a leader that never comes.
	defer func() {
		g.mu.Lock()
		if len(g.queue) > 0 {
			close(g.queue[0].lead)
		} else {
			g.leading = false
		}
		g.mu.Unlock()
	}()
	g.runGroup(batch)
}

// runGroup runs batch's transactions and tells each member how it ended.
func (g *group) runGroup(batch []*member) {
	defer func() {
		p := recover()
		for _, m := range batch {
			if p != nil && m.err == nil && m.panicked == nil {
				m.err = fmt.Errorf("%w (panic: %v)", errGroupAborted, p)
			}
			close(m.done)
		}
		if p != nil {
			panic(p)
		}
	}()
	if len(batch) == 1 {
		m := batch[0]
		m.err, m.panicked = call(func() error { return inTx(m.ctx, g.db.BeginTx, m.fn) })
		return
	}
	// Not any member's context: database/sql rolls a transaction back when
	// the context it began with ends, which would undo the others' work.
	// Each member's statements still run on its own context, but are not
	// interrupted by it (uninterrupted, driver.go): SQLite answers an
	// interrupted write by rolling back the whole transaction, so one
	// client that hangs up mid-write would send every other member round
	// again, and a stream of them could use up the others' retries. A
	// member whose context has ended fails at its next statement instead,
	// and is undone alone.
	ctx := context.Background()
	tx, release, err := g.begin(ctx)
	if err != nil {
		for _, m := range batch {
			m.err = err
		}
		return
	}
	defer release()
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit; before release
	var ok []*member
	for _, m := range batch {
		if err := g.runMember(ctx, tx, m); err != nil {
			// The shared transaction is gone or in doubt: undo it all and
			// let every member not failed on its own run again, this one
			// too if its work did not fail (a savepoint statement did).
			for _, o := range batch {
				if o.err == nil && o.panicked == nil {
					o.err = fmt.Errorf("%w (%v)", errGroupAborted, err)
				}
			}
			return
		}
		if m.err == nil && m.panicked == nil {
			ok = append(ok, m)
		}
	}
	if err := tx.Commit(); err != nil {
		for _, m := range ok {
			m.err = err
		}
		return
	}
	g.mu.Lock()
	g.commits++
	g.mu.Unlock()
}

// begin takes the connection, marks its statements uninterrupted and
// begins the shared transaction on it; release, after the transaction has
// ended, makes the connection interruptible again and gives it back.
func (g *group) begin(ctx context.Context) (tx *sql.Tx, release func(), err error) {
	c, err := g.db.Conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	release = func() {
		_ = setUninterrupted(c, false)
		c.Close()
	}
	if err := setUninterrupted(c, true); err != nil {
		release()
		return nil, nil, err
	}
	if tx, err = c.BeginTx(ctx, nil); err != nil {
		release()
		return nil, nil, err
	}
	return tx, release, nil
}

// setUninterrupted sets the connection's uninterrupted mark. A handle that
// is not Open's (a bare modernc connection) has none: its group members
// stay interruptible, as before, and the group still aborts safely.
func setUninterrupted(c *sql.Conn, on bool) error {
	return c.Raw(func(dc any) error {
		if cc, ok := dc.(*cachingConn); ok {
			cc.uninterrupted.Store(on)
		}
		return nil
	})
}

// runMember runs m's work inside a savepoint of tx, undoing it alone if it
// fails. m.err is m's own failure; the error returned is the shared
// transaction's: a savepoint statement that failed, which happens when a
// statement of m's made SQLite roll the whole transaction back (a full
// disk, an I/O error, a member that ended the transaction itself; an
// interrupted write would too, if the connection were not uninterrupted).
func (g *group) runMember(ctx context.Context, tx *sql.Tx, m *member) error {
	if _, err := tx.ExecContext(ctx, "SAVEPOINT member"); err != nil {
		return err
	}
	m.err, m.panicked = call(func() error { return m.fn(sqlTx{tx: tx}) })
	if m.err != nil || m.panicked != nil {
		if _, err := tx.ExecContext(ctx, "ROLLBACK TO member"); err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, "RELEASE member")
	return err
}

// call runs f, catching a panic.
func call(f func() error) (err error, panicked any) {
	defer func() {
		if p := recover(); p != nil {
			err, panicked = fmt.Errorf("panic in a SQLite transaction: %v", p), p
		}
	}()
	return f(), nil
}
