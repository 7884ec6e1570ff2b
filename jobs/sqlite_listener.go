package jobs

import (
	"context"
	"database/sql"
	"errors"
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
type sqliteListener struct {
	riverdriver.Listener
	db      *sql.DB
	every   time.Duration
	version int64     // the last data_version seen
	readAt  time.Time // when the outbox was last read
}

func (l *sqliteListener) WaitForNotification(ctx context.Context) (*riverdriver.Notification, error) {
	// A call reads the outbox first: the previous call may have left rows
	// buffered in the wrapped listener.
	read := true
	for {
		again := false
		if read || time.Since(l.readAt) >= outboxEverySQLite {
			l.readAt = time.Now()
			waits := l.db.Stats().WaitCount
			readCtx, cancel := context.WithTimeout(ctx, l.every)
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
			t := time.NewTimer(l.every)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
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
	}
}
