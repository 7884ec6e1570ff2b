package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// TestFilesPrivate: a database Hallmark creates, and the -wal and -shm
// files SQLite makes beside it, are readable by their owner alone (they
// hold EAB MAC keys and the nonce key); SQLite made them 0644. A file
// others may read is one sentence of advice, naming it.
func TestFilesPrivate(t *testing.T) {
	ctx := context.Background()
	db, url := migrated(t)
	path := strings.TrimPrefix(url, "sqlite:")
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if m := fi.Mode().Perm(); m != 0o600 {
			t.Errorf("%s has mode %04o, want 0600", filepath.Base(p), m)
		}
	}
	if advice, err := db.Advice(ctx); err != nil || len(advice) != 0 {
		t.Fatalf("Advice on a private database = %q, %v; want none", advice, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	advice, err := db.Advice(ctx)
	if err != nil || len(advice) != 1 || !strings.Contains(advice[0], path+" (mode 0644)") || strings.Contains(advice[0], path+"-wal (") {
		t.Fatalf("Advice on a database others may read = %q, %v; want one sentence naming %s and its mode only", advice, err, path)
	}
}

// TestBackupTo: a copy taken while another process writes is a whole
// database, readable by its owner alone, holding every row committed
// before it began; it replaces the file it is given whole or not at all,
// and never the database's own file.
func TestBackupTo(t *testing.T) {
	ctx := context.Background()
	db, url := migrated(t)
	path := strings.TrimPrefix(url, "sqlite:")
	before := mustAccount(t, db.Store, "before")

	// Another process writes throughout.
	writer, err := open.Open(ctx, url, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(writer.Close)
	var wrote atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			mustAccount(t, writer.Store, fmt.Sprintf("during-%d", i))
			wrote.Add(1)
		}
	}()
	for wrote.Load() < 5 {
		time.Sleep(5 * time.Millisecond)
	}
	dir := t.TempDir()
	to := filepath.Join(dir, "copy.db")
	if err := os.WriteFile(to, []byte("an older backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := db.Backup(ctx, to)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("Backup while another process writes: %v", err)
	}
	if b.Path != to || b.SchemaVersion < 12 || b.Bytes == 0 || b.At.IsZero() {
		t.Errorf("Backup = %+v; want %s, schema version 12 or later, its size and time", b, to)
	}
	fi, err := os.Stat(to)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != b.Bytes {
		t.Fatalf("the copy: %v, %v; want mode 0600 and %d bytes", fi, err, b.Bytes)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*partial*")); len(left) != 0 {
		t.Errorf("temporary files left beside the copy: %v", left)
	}

	// The copy opens as a Hallmark database and holds what was committed
	// before it began, and only whole transactions after.
	cp, err := open.Open(ctx, "sqlite:"+to, 0)
	if err != nil {
		t.Fatalf("opening the copy: %v", err)
	}
	defer cp.Close()
	if got, err := cp.Store.AccountByID(ctx, before.ID); err != nil || got.ID != before.ID {
		t.Errorf("the copy lacks the account committed before it: %+v, %v", got, err)
	}
	st, err := cp.MigrationStatus(ctx)
	if err != nil || len(st.Pending) != 0 {
		t.Errorf("the copy's migrations: %+v, %v; want none pending", st, err)
	}
	accounts, _, err := cp.Store.AccountsList(ctx, store.Page{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if n := int64(len(accounts)); n < 1 || n > 1+wrote.Load() {
		t.Errorf("the copy holds %d accounts; want between 1 and the %d committed", n, 1+wrote.Load())
	}
	t.Logf("copy of %d bytes with %d of the %d accounts committed by its end", b.Bytes, len(accounts), 1+wrote.Load())

	// Never over the database itself; nothing left of a copy that failed.
	if _, err := db.Backup(ctx, path); err == nil || !strings.Contains(err.Error(), "own file") {
		t.Errorf("Backup onto the database's own file = %v, want refused", err)
	}
	if _, err := db.Backup(ctx, filepath.Join(dir, "no-such-dir", "copy.db")); err == nil {
		t.Error("Backup into a directory that does not exist succeeded")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*partial*")); len(left) != 0 {
		t.Errorf("temporary files left after failed backups: %v", left)
	}
}

// TestBackupOfPostgreSQL: PostgreSQL's own tools back it up.
func TestBackupOfPostgreSQL(t *testing.T) {
	ctx := context.Background()
	db, err := open.Open(ctx, testdb.Postgres(t), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Backup(ctx, filepath.Join(t.TempDir(), "copy")); err != open.ErrBackupElsewhere {
		t.Fatalf("Backup of PostgreSQL = %v, want ErrBackupElsewhere", err)
	}
}

// migrated opens a fresh database file as the binaries do, migrated.
func migrated(t *testing.T) (*open.DB, string) {
	t.Helper()
	url := testdb.SQLite(t)
	db, err := open.Open(context.Background(), url, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db, url
}

func mustAccount(t *testing.T, st store.Store, name string) *store.Account {
	t.Helper()
	a, err := st.AccountCreate(context.Background(), &store.Account{KeyJWK: []byte(`{"kty":"EC","name":"` + name + `"}`), Thumbprint: "thumb-" + name, Status: acme.StatusValid})
	if err != nil {
		t.Error(err)
	}
	return a
}
