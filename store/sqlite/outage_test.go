package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/sqlstore"
)

// TestClassifyCodes: which SQLite result codes are an outage (the file
// locked, unreadable, unwritable, full), which are retried (busy), and
// that corruption and constraint failures are neither.
func TestClassifyCodes(t *testing.T) {
	for _, tc := range []struct {
		code int
		want sqlstore.ErrorKind
	}{
		{sqlite3.SQLITE_BUSY, sqlstore.ErrRetry},
		{sqlite3.SQLITE_BUSY_SNAPSHOT, sqlstore.ErrRetry},
		{sqlite3.SQLITE_BUSY_TIMEOUT, sqlstore.ErrRetry},
		{sqlite3.SQLITE_LOCKED, sqlstore.ErrUnavailable},
		{sqlite3.SQLITE_IOERR, sqlstore.ErrUnavailable},
		{sqlite3.SQLITE_IOERR_FSYNC, sqlstore.ErrUnavailable},
		{sqlite3.SQLITE_IOERR_WRITE, sqlstore.ErrUnavailable},
		{sqlite3.SQLITE_FULL, sqlstore.ErrUnavailable},
		{sqlite3.SQLITE_CANTOPEN, sqlstore.ErrUnavailable},
		{sqlite3.SQLITE_READONLY_DBMOVED, sqlstore.ErrUnavailable},
		{sqlite3.SQLITE_PROTOCOL, sqlstore.ErrUnavailable},
		{sqlite3.SQLITE_NOMEM, sqlstore.ErrUnavailable},
		{sqlite3.SQLITE_CORRUPT, sqlstore.ErrOther},
		{sqlite3.SQLITE_NOTADB, sqlstore.ErrOther},
		{sqlite3.SQLITE_INTERRUPT, sqlstore.ErrOther},
		{sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlstore.ErrUnique},
		{sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY, sqlstore.ErrForeignKey},
		{sqlite3.SQLITE_CONSTRAINT_CHECK, sqlstore.ErrOther},
	} {
		if got := classifyCode(tc.code); got != tc.want {
			t.Errorf("classifyCode(%d) = %v, want %v", tc.code, got, tc.want)
		}
	}
}

// TestBusyBeyondTimeoutIsUnavailable: another process holding the write
// lock past the busy timeout, through every retry, makes a write fail with
// store.ErrUnavailable (the frontend's 503), while reads go on (WAL); once
// the lock is released the write succeeds.
func TestBusyBeyondTimeoutIsUnavailable(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "busy.db")
	db, err := open(path, synchronous)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	db.Close()
	// The store's handle as Open makes it, but waiting 50 ms, not 10 s.
	db, err = openPool(fmt.Sprintf("%s?_pragma=busy_timeout(50)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_txlock=immediate", path), 1)
	if err != nil {
		t.Fatal(err)
	}
	st := New(db, nil)
	t.Cleanup(func() { _ = st.Close() })
	first, err := st.AccountCreate(ctx, &store.Account{KeyJWK: []byte(`{}`), Thumbprint: "before", Status: acme.StatusValid})
	if err != nil {
		t.Fatal(err)
	}

	other, err := Open(path) // another process's handle
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	holder, err := other.BeginTx(ctx, nil) // BEGIN IMMEDIATE: the write lock
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.ExecContext(ctx, `UPDATE settings SET name = name WHERE 0`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = st.AccountCreate(ctx, &store.Account{KeyJWK: []byte(`{}`), Thumbprint: "during", Status: acme.StatusValid})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a write while another process held the lock past the busy timeout: %v, want store.ErrUnavailable", err)
	}
	t.Logf("refused after %s: %v", time.Since(start).Round(time.Millisecond), err)
	if _, err := st.AccountByID(ctx, first.ID); err != nil {
		t.Errorf("a read while the lock was held: %v", err)
	}
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AccountCreate(ctx, &store.Account{KeyJWK: []byte(`{}`), Thumbprint: "after", Status: acme.StatusValid}); err != nil {
		t.Errorf("a write once the lock was released: %v", err)
	}
}
