package jobs

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"

	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riversqlite"
)

// outboxEverySQLite is how often a SQLite worker reads the notification
// outbox when no other process has committed: rows its own process wrote
// (its own inserts, leadership) do not change its data_version. It is
// riversqlite's own fixed poll interval.
const outboxEverySQLite = 50 * time.Millisecond

// sqliteDriver is riversqlite's driver with a listener that notices other
// processes' notifications within checkEvery.
type sqliteDriver struct {
	*riversqlite.Driver
	db         *sql.DB
	checkEvery time.Duration
}

func (d sqliteDriver) GetListener(p *riverdriver.GetListenenerParams) riverdriver.Listener {
	return &sqliteListener{Listener: d.Driver.GetListener(p), db: d.db, every: d.checkEvery}
}

// sqliteListener wraps riversqlite's listener, which reads the outbox (a
// table: SQLite has no LISTEN) every 50 ms with no setting to change it.
// The outbox read stays River's; this adds a cheap check every `every`,
// PRAGMA data_version, which changes when another connection (another
// process) has committed, and reads the outbox early only then.
//
// It reads the outbox by calling the wrapped WaitForNotification with a
// deadline: that reads at once, returns a notification if there is one,
// and otherwise sleeps until the deadline. Ending its wait loses nothing:
// it keeps its cursor and buffered rows across calls, and River's notifier
// ends waits the same way to change subscriptions.
//
// River's notifier calls WaitForNotification from one goroutine at a time.
//
// Where it can (Linux inotify, through fsnotify), it also watches the
// database's WAL file (walWatch) and checks data_version as soon as the file
// is written, so a job another process inserts starts without waiting for
// the next poll; the poll then only backs the watch up, every
// outboxEverySQLite. A check that finds no change right after a write is
// repeated, recheckSQLite later and then twice as long each time, up to
// rechecksSQLite times: the event arrives when the writer appends its
// commit to the WAL, and the commit shows only once the writer has synced
// the file and published it in the WAL index, which writes no file event
// (the index is shared memory). One recheck 1 ms later missed every commit
// whose sync took longer, on a disk where an idle fdatasync took ~1 ms:
// those jobs waited for the 50 ms poll (round 10 of docs/performance.md).
type sqliteListener struct {
	riverdriver.Listener
	db        *sql.DB
	every     time.Duration
	pollEvery time.Duration // the watch's backing poll; outboxEverySQLite unless a test sets it
	version   int64         // the last data_version seen
	readAt    time.Time     // when the outbox was last read

	mu      sync.Mutex // guards watch and watched against Close
	watch   *walWatch  // nil when not (yet) watching
	watched bool       // watchWAL was tried
	// rechecks is how many checks are left after a write that showed no
	// commit; the next waits recheckSQLite << (rechecksSQLite - rechecks).
	rechecks int
}

// After a write with no visible commit: checks at 1, 2, 4, 8 and 16 ms
// (31 ms in all, under the 50 ms poll).
const (
	recheckSQLite  = time.Millisecond
	rechecksSQLite = 5
)

// startWatch starts the WAL watch on the first wait; if it cannot (another
// platform, no inotify instances left), the listener polls every `every`.
func (l *sqliteListener) startWatch() *walWatch {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.watched {
		l.watched = true
		// Not the wait's ctx: River's notifier cancels waits to change
		// subscriptions, and one canceled here would leave it polling.
		wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		l.watch, _ = watchWAL(wctx, l.db)
		cancel()
	}
	return l.watch
}

func (l *sqliteListener) Close(ctx context.Context) error {
	l.mu.Lock()
	l.watch.close()
	l.watch, l.watched = nil, false
	l.mu.Unlock()
	return l.Listener.Close(ctx)
}

func (l *sqliteListener) WaitForNotification(ctx context.Context) (*riverdriver.Notification, error) {
	watch := l.startWatch()
	// How long an outbox read waits for rows, and how long the loop sleeps
	// between checks when nothing wakes it.
	pollEvery := outboxEverySQLite
	if l.pollEvery > 0 {
		pollEvery = l.pollEvery
	}
	readFor, sleep := l.every, l.every
	if watch != nil {
		readFor, sleep = recheckSQLite, pollEvery
	}
	// A call reads the outbox first: the previous call may have left rows
	// buffered in the wrapped listener.
	read := true
	for {
		again, woken := false, false
		if read || time.Since(l.readAt) >= pollEvery {
			l.readAt = time.Now()
			waits := l.db.Stats().WaitCount
			readCtx, cancel := context.WithTimeout(ctx, readFor)
			n, err := l.Listener.WaitForNotification(readCtx)
			cancel()
			switch {
			case err == nil:
				return n, nil
			case ctx.Err() != nil:
				return nil, ctx.Err()
			case !errors.Is(err, context.DeadlineExceeded):
				return nil, err
			}
			// Nothing new, and the read has waited out `every`; unless it
			// queued for the handle's one connection and the deadline came
			// before the read did.
			again = l.db.Stats().WaitCount != waits
		} else {
			d := sleep
			if l.rechecks > 0 {
				d = recheckSQLite << (rechecksSQLite - l.rechecks)
			}
			var wake <-chan struct{}
			if watch != nil {
				wake = watch.wake
			}
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-wake:
				t.Stop()
				woken = true
			case <-t.C:
			}
		}
		var v int64
		if err := l.db.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
			return nil, err
		}
		// With more than one connection in the pool each has its own
		// counter; a spurious change only costs a read.
		read = again || v != l.version
		l.version = v
		switch {
		case read:
			l.rechecks = 0
		case woken: // a write with no visible commit (yet): look again soon
			l.rechecks = rechecksSQLite
		case l.rechecks > 0:
			l.rechecks--
		}
	}
}
