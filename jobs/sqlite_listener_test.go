package jobs

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riversqlite"
)

// TestSQLiteListenerRechecks: a notification committed a few milliseconds
// after the WAL write that woke the listener (a writer still syncing, whose
// commit the WAL index shows only then, with no file event of its own) is
// delivered by the listener's rechecks, not left for its backing poll, here
// ten seconds away. With a single recheck 1 ms after the wake, it waited for
// that poll.
func TestSQLiteListenerRechecks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hallmark.db")
	open := func() *sql.DB {
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		t.Cleanup(func() { db.Close() })
		return db
	}
	listenerDB, writerDB := open(), open()
	if err := NewSQLite(listenerDB).Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// The writer's connection is open before the clock matters: the
	// rechecks span 31 ms, and opening a file is not what is under test.
	if err := writerDB.PingContext(ctx); err != nil {
		t.Fatal(err)
	}

	d := sqliteDriver{Driver: riversqlite.New(listenerDB), db: listenerDB, checkEvery: notifyCheckSQLite}
	l := d.GetListener(&riverdriver.GetListenenerParams{}).(*sqliteListener)
	// A watch the test wakes by hand: a real one would also wake on the
	// commit itself, which is not the case under test.
	wake := make(chan struct{}, 1)
	l.watch, l.watched = &walWatch{wake: wake}, true
	l.pollEvery = 10 * time.Second
	if err := l.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	const topic = "river_insert"
	if err := l.Listen(ctx, topic); err != nil {
		t.Fatal(err)
	}

	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		n, err := l.WaitForNotification(wctx)
		if err == nil && (n.Topic != topic || n.Payload != "job") {
			t.Errorf("notification %+v, want topic %s with payload job", n, topic)
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond) // the listener has read the outbox and waits
	wake <- struct{}{}                 // the writer's WAL write...
	time.Sleep(4 * time.Millisecond)   // ...its sync...
	if err := riversqlite.New(writerDB).GetExecutor().NotifyMany(ctx, &riverdriver.NotifyManyParams{Topic: topic, Payload: []string{"job"}}); err != nil {
		t.Fatal(err) // ...and its commit, visible only now
	}
	if err := <-got; err != nil {
		t.Fatalf("the notification committed 4 ms after the wake was not delivered before the 10 s poll: %v", err)
	}
}
