package jobs

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"

	"github.com/fsnotify/fsnotify"
)

// walWatch wakes a SQLite listener when a process writes the database's
// write-ahead log, which every commit does: another process's job insert is
// seen in the time a file event takes to arrive, not at the next
// poll. It watches the directory rather than the file because
// SQLite deletes the -wal file when its last connection closes and creates
// it again on the next write.
//
// Events come from every write, a notification or not; the listener tells
// them apart by the outbox's highest id, which only a committed
// notification raises.
type walWatch struct {
	w    *fsnotify.Watcher
	wake chan struct{} // one pending wake-up at most: events coalesce
}

// watchWAL starts watching the WAL of db's main database. It returns nil,
// nil for a database with no file (in memory).
func watchWAL(ctx context.Context, db *sql.DB) (*walWatch, error) {
	path, err := mainDatabaseFile(ctx, db)
	if err != nil || path == "" {
		return nil, err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	if err := w.Add(filepath.Dir(path)); err != nil {
		w.Close()
		return nil, err
	}
	ww := &walWatch{w: w, wake: make(chan struct{}, 1)}
	wal := filepath.Base(path) + "-wal"
	go func() {
		for {
			select {
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if filepath.Base(ev.Name) == wal && ev.Has(fsnotify.Write|fsnotify.Create) {
					select {
					case ww.wake <- struct{}{}:
					default:
					}
				}
			case _, ok := <-w.Errors:
				// An overflowed event queue loses nothing that matters:
				// the listener's fallback poll still runs.
				if !ok {
					return
				}
			}
		}
	}()
	return ww, nil
}

func (ww *walWatch) close() {
	if ww != nil && ww.w != nil { // a test's watch has no watcher
		ww.w.Close()
	}
}

// mainDatabaseFile is the file of db's "main" schema ("" in memory).
func mainDatabaseFile(ctx context.Context, db *sql.DB) (string, error) {
	rows, err := db.QueryContext(ctx, "PRAGMA database_list")
	if err != nil {
		return "", err
	}
	defer rows.Close()
	for rows.Next() {
		var seq int
		var name, file string
		if err := rows.Scan(&seq, &name, &file); err != nil {
			return "", err
		}
		if name == "main" {
			return file, rows.Err()
		}
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	return "", errors.New("PRAGMA database_list names no main database")
}
