package jobs

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// TestWALWatchWakes: another handle's commit to the same SQLite file wakes
// the watch (that is how a worker hears of a job the frontend inserted),
// also after the -wal file is deleted and created again, which SQLite does
// when the last connection closes.
func TestWALWatchWakes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hallmark.db")
	open := func() *sql.DB {
		db, err := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	watcher := open()
	defer watcher.Close()
	if _, err := watcher.ExecContext(ctx, `CREATE TABLE t (v integer)`); err != nil {
		t.Fatal(err)
	}
	ww, err := watchWAL(ctx, watcher)
	if err != nil || ww == nil {
		t.Fatalf("watchWAL = %v, %v", ww, err)
	}
	defer ww.close()

	for round := range 2 {
		drain(ww.wake)
		writer := open()
		if _, err := writer.ExecContext(ctx, `INSERT INTO t VALUES (1)`); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ww.wake:
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: another handle's commit did not wake the watch", round)
		}
		writer.Close()
		if round == 0 {
			// The last connection closing removes the -wal file; the
			// next write creates it again.
			watcher.Close()
			if _, err := os.Stat(path + "-wal"); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the -wal file outlived the last connection (%v): the second round would not test its re-creation", err)
			}
			watcher = open()
		}
	}
}

func drain(c <-chan struct{}) {
	for {
		select {
		case <-c:
		case <-time.After(50 * time.Millisecond):
			return
		}
	}
}

// TestWALWatchInMemory: a database with no file has nothing to watch.
func TestWALWatchInMemory(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if ww, err := watchWAL(context.Background(), db); ww != nil || err != nil {
		t.Fatalf("watchWAL on :memory: = %v, %v; want nil, nil", ww, err)
	}
}
