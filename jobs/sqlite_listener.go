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
// outbox when no notification has committed, a backstop: it is
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
// the outbox's highest id (River's own NotificationGetLastID), which grows
// only when a notification commits, from this process or another, and
// reads the outbox early only then.
//
// It reads the outbox by calling the wrapped WaitForNotification with a
// deadline: that reads at once, returns a notification if there is one,
// and otherwise sleeps until the deadline. Ending its wait loses nothing:
// it keeps its cursor and buffered rows across calls, and River's notifier
// ends waits the same way to change subscriptions.
//
// The deadline also ends a read whose query has not finished, and the two
// look alike from here (both are DeadlineExceeded). So a read the highest
// id called for that delivers nothing is repeated with twice the deadline,
// up to the poll interval, before the rows up to that id count as read:
// on a loaded machine the outbox query can take longer than 1 ms, and a
// version counter taken as read at the first deadline left the
// notification for the next 50 ms poll, whose own 1 ms read could be cut
// short the same way (TestSQLiteListenerSlowRead).
//
// River's notifier calls WaitForNotification from one goroutine at a time.
//
// Where it can (Linux inotify, through fsnotify), it also watches the
// database's WAL file (walWatch) and checks the highest id as soon as the
// file is written, so a job another process inserts starts without waiting
// for the next poll; the poll then only backs the watch up, every
// outboxEverySQLite. A check that finds no change right after a write is
// repeated, recheckSQLite later and then twice as long each time, up to
// rechecksSQLite times: the event arrives when the writer appends its
// commit to the WAL, and the commit shows only once the writer has synced
// the file and published it in the WAL index, which writes no file event
// (the index is shared memory). A single recheck would miss every commit
// whose sync took longer than it, leaving that job to the 50 ms poll.
type sqliteListener struct {
	riverdriver.Listener
	db        *sql.DB
	every     time.Duration
	pollEvery time.Duration // the watch's backing poll; outboxEverySQLite unless a test sets it
	readAt    time.Time     // when the outbox was last read
	// seen is the outbox's highest id when a read last delivered, or last
	// ran out its longest deadline with nothing: every row up to it has
	// been read (one edge: a delivery from the wrapped listener's buffer
	// counts rows it has not fetched yet; if their fetch is cut short too,
	// they wait for the poll). unsure counts the reads since then that
	// rows past seen called for and that delivered nothing.
	seen   int64
	unsure int

	mu      sync.Mutex // guards watch and watched against Close
	watch   *walWatch  // nil when not (yet) watching
	watched bool       // watchWAL was tried
	// rechecks is how many checks are left after a write that showed no
	// commit; the next waits recheckSQLite << (rechecksSQLite - rechecks).
	rechecks int
}

// After a write with no visible commit: checks 0.25, 0.5, 1, 2, 4, 8 and
// 16 ms apart (31.75 ms in all, under the 50 ms poll), so the first check
// after the commit is published comes at most twice its sync's time later,
// however long the sync took.
const (
	recheckSQLite  = 250 * time.Microsecond
	rechecksSQLite = 7
)

// outboxTopSQL is riversqlite's NotificationGetLastID.
const outboxTopSQL = `SELECT cast(coalesce(max(id), 0) AS integer) FROM river_notification`

// Connect connects the wrapped listener and takes the outbox's highest id
// as read, as the wrapped listener does: rows already there are history.
func (l *sqliteListener) Connect(ctx context.Context) error {
	if err := l.Listener.Connect(ctx); err != nil {
		return err
	}
	// Failing to read it only costs the first wait a read that finds
	// nothing new.
	_ = l.db.QueryRowContext(ctx, outboxTopSQL).Scan(&l.seen)
	return nil
}

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
	var top int64 // the highest id when rows past seen called for this read; 0 when none did
	for {
		again, woken := false, false
		if read || time.Since(l.readAt) >= pollEvery {
			d := readFor
			if top > 0 {
				d = min(readFor<<l.unsure, pollEvery)
			}
			var n *riverdriver.Notification
			var err error
			if n, again, err = l.read(ctx, d, top, pollEvery); n != nil || err != nil {
				return n, err
			}
		} else {
			d := sleep
			if l.rechecks > 0 {
				d = recheckSQLite << (rechecksSQLite - l.rechecks)
			}
			var wake <-chan struct{}
			if watch != nil {
				wake = watch.wake
			}
			var err error
			if woken, err = pause(ctx, d, wake); err != nil {
				return nil, err
			}
		}
		var v int64
		if err := l.db.QueryRowContext(ctx, outboxTopSQL).Scan(&v); err != nil {
			return nil, err
		}
		top = 0
		if v > l.seen {
			top = v
		}
		read = again || top > 0
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

// read reads the outbox through the wrapped listener for at most d; top
// is the highest id past seen that called for the read (0: none did). With
// no notification and no error, the read waited out its deadline; again
// says it queued for the handle's one connection and the deadline came
// before the read did.
func (l *sqliteListener) read(ctx context.Context, d time.Duration, top int64, pollEvery time.Duration) (n *riverdriver.Notification, again bool, err error) {
	l.readAt = time.Now()
	waits := l.db.Stats().WaitCount
	readCtx, cancel := context.WithTimeout(ctx, d)
	n, err = l.Listener.WaitForNotification(readCtx)
	cancel()
	switch {
	case err == nil:
		if top > 0 {
			l.seen, l.unsure = top, 0
		}
		return n, false, nil
	case ctx.Err() != nil:
		return nil, false, ctx.Err()
	case !errors.Is(err, context.DeadlineExceeded):
		return nil, false, err
	}
	again = l.db.Stats().WaitCount != waits
	if top > 0 && !again {
		if d >= pollEvery {
			l.seen, l.unsure = top, 0 // the longest read found nothing: those rows are not for us
		} else {
			l.unsure++ // found nothing, or was cut short: read again, longer
		}
	}
	return nil, again, nil
}

// pause waits d, or until wake (a write on this process) or ctx ends.
func pause(ctx context.Context, d time.Duration, wake <-chan struct{}) (woken bool, err error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-wake:
		return true, nil
	case <-t.C:
		return false, nil
	}
}
