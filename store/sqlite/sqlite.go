package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/sqlstore"
)

// New returns the store on db, which must come from Open (or be opened the
// same way). ins inserts jobs on the store's own transactions (*sql.Tx).
// Close closes db.
func New(db *sql.DB, ins jobs.Inserter) store.Store {
	return sqlstore.New(Conn(db), sqlstore.SQLite, ins)
}

// BusyTimeoutMS is how long a writer waits for another process's
// transaction before giving up: the frontend and the worker share the file.
const BusyTimeoutMS = 10000

// DSN is the modernc.org/sqlite data source for path: WAL so readers never
// block the writer, busy_timeout so two processes wait for each other
// rather than fail, foreign keys on, BEGIN IMMEDIATE so a transaction
// takes the write lock at its start (a deferred transaction that upgrades
// later fails with SQLITE_BUSY instead of waiting), and synchronous=FULL
// so a commit is on disk before it returns: in WAL mode NORMAL syncs only
// at checkpoints, and a power loss would forget everything since the last
// one, issued certificates included. (The consumed nonces are not in the
// file at all: store/sqlstore/memnonces.go.)
func DSN(path string) string { return dsn(path, synchronous) }

func dsn(path, sync string) string {
	return path + fmt.Sprintf("?_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(%s)&_txlock=immediate", BusyTimeoutMS, sync)
}

// synchronous is the store's connections' setting.
const synchronous = "FULL"

// Open opens (creating it and its directory) the database file at path
// with one open connection: the store and the jobs it inserts share the
// handle, and a single connection is what makes BEGIN IMMEDIATE serialize
// the store's writers without SQLITE_BUSY. (A started worker runs River's
// own work on a second handle, OpenJobRunner's, which waits for this one's
// write lock as another process's would.)
func Open(path string) (*sql.DB, error) { return open(path, synchronous) }

// OpenJobRunner opens a second handle on path, with one connection, for
// River's own work in a started worker (jobs.NewSQLiteRunner): fetching
// jobs, completing them, rescuing, its leader and its outbox reads. Its
// commits do not wait for a sync of the WAL (synchronous=NORMAL), as a
// PostgreSQL worker's River pool commits with synchronous_commit=off
// (jobs.runnerPool), and for the same reasons nothing is lost by it:
//   - a fetch or completion that a power loss forgets puts its job back,
//     and the job runs again; the handlers are idempotent (a verdict and
//     an issuance are compare-and-swaps);
//   - what a job does that must survive (a verdict, a certificate) the
//     store commits on its own handle with synchronous=FULL, and that
//     sync of the WAL carries every earlier frame with it, this handle's
//     included: SQLite appends to the WAL in commit order, so a crash
//     forgets River's bookkeeping only together with everything after it;
//   - jobs are inserted in the store's transactions, on the store's handle.
//
// A synced fetch would be on the path from a claim to its verdict: at one
// job at a time ~1 ms of the ~6 a validation takes to be recorded, enough
// to make a client's first poll come too early.
func OpenJobRunner(path string) (*sql.DB, error) { return open(path, "NORMAL") }

func open(path, sync string) (*sql.DB, error) {
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("opening SQLite database %q: the path must not contain '?' or '#'", path)
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("creating the directory of SQLite database %s: %w", path, err)
		}
	}
	if err := createPrivate(path); err != nil {
		return nil, fmt.Errorf("creating SQLite database %s: %w", path, err)
	}
	db, err := openPool(dsn(path, sync), 1)
	if err != nil {
		return nil, fmt.Errorf("opening SQLite database %s: %w", path, err)
	}
	return db, nil
}

// openPool opens a handle of n connections on the data source, kept open
// for good (each holds its prepared statements, driver.go), and checks
// that one connects.
func openPool(dataSource string, n int) (*sql.DB, error) {
	db, err := sql.Open(driverName, dataSource) // driver.go: modernc's, keeping statements prepared
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// createPrivate creates the database file at path, empty and readable by
// its owner alone, unless it exists. SQLite would create it with the
// umask's mode, 0644 as a rule, and gives its -wal and -shm files the
// database file's mode; the database holds secrets (EAB MAC keys, the
// nonce key), which other users of the host must not read.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return f.Close()
}

// Advice is what an operator should change about the database file at
// path, one sentence each (open.DB.Advice): a file other users of the host
// may read. Hallmark's pragmas are its own, so there is nothing else.
func Advice(path string) ([]string, error) {
	var open []string
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if fi.Mode().Perm()&0o077 != 0 {
			open = append(open, fmt.Sprintf("%s (mode %04o)", p, fi.Mode().Perm()))
		}
	}
	if len(open) == 0 {
		return nil, nil
	}
	return []string{fmt.Sprintf("other users of this host may read the SQLite database, which holds EAB MAC keys and the nonce key: %s; chmod 600 the database and its -wal and -shm files",
		strings.Join(open, ", "))}, nil
}

// Conn adapts db to sqlstore's executor (for the migration runner).
func Conn(db *sql.DB) sqlstore.Conn { return conn{db: db, g: newGroup(db)} }

type conn struct {
	db *sql.DB
	rd *sql.DB // the read-only pool for autocommitted SELECTs (readers.go); nil: db
	g  *group  // this store's write transactions, which share commits (group.go)
}

func (c conn) InTx(ctx context.Context, fn func(sqlstore.Tx) error) error {
	return c.g.inTx(ctx, fn)
}

// inTx runs fn in a transaction that begin starts (BEGIN IMMEDIATE, from
// the DSN), committing when fn returns nil.
func inTx(ctx context.Context, begin func(context.Context, *sql.TxOptions) (*sql.Tx, error), fn func(sqlstore.Tx) error) error {
	tx, err := begin(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if err := fn(sqlTx{tx: tx}); err != nil {
		return err
	}
	return tx.Commit()
}

func (c conn) Ping(ctx context.Context) error { return c.db.PingContext(ctx) }

func (c conn) Close() error {
	if c.rd != nil {
		_ = c.rd.Close()
	}
	return c.db.Close()
}

func (c conn) Classify(err error) sqlstore.ErrorKind {
	if errors.Is(err, errGroupAborted) {
		return sqlstore.ErrRetry
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return sqlstore.ErrOther
	}
	return classifyCode(se.Code())
}

// classifyCode is Classify for an SQLite result code (extended or primary).
// A busy database is retried (and once the retries run out the store
// reports it unavailable); the file locked, unreadable, unwritable or full
// is unavailable at once: the request was sound, the CA cannot serve it
// now. Corruption is no outage: it stays a logged internal error.
func classifyCode(code int) sqlstore.ErrorKind {
	switch code {
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return sqlstore.ErrUnique
	case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		return sqlstore.ErrForeignKey
	}
	switch code & 0xff {
	case sqlite3.SQLITE_BUSY:
		return sqlstore.ErrRetry
	case sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL, sqlite3.SQLITE_CANTOPEN,
		sqlite3.SQLITE_PROTOCOL, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_NOMEM:
		return sqlstore.ErrUnavailable
	}
	return sqlstore.ErrOther
}

type sqlTx struct {
	tx *sql.Tx
}

func (t sqlTx) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := t.tx.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (t sqlTx) Query(ctx context.Context, q string, args ...any) (sqlstore.Rows, error) {
	rows, err := t.tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

// Batch runs stmts one after another: SQLite has no round trips to save.
func (t sqlTx) Batch(ctx context.Context, stmts []sqlstore.Stmt) ([]int64, error) {
	return runEach(ctx, t, stmts)
}

func (t sqlTx) Raw() jobs.Tx { return t.tx }

// runEach runs stmts in order on e, stopping at the first that fails
// (sqlstore.Tx.Batch). A Dest statement's result is 1 when it found a row.
func runEach(ctx context.Context, e sqlstore.Tx, stmts []sqlstore.Stmt) ([]int64, error) {
	n := make([]int64, 0, len(stmts))
	for _, st := range stmts {
		k, err := int64(1), error(nil)
		switch {
		case st.Each != nil:
			k, err = scanEach(ctx, e, st)
		case st.Dest == nil:
			k, err = e.Exec(ctx, st.SQL, st.Args...)
		default:
			k, err = scanFirst(ctx, e, st)
		}
		if err != nil {
			return n, err
		}
		n = append(n, k)
	}
	return n, nil
}

// scanFirst scans st's first row into st.Dest: 1 if there was one, else 0.
func scanFirst(ctx context.Context, e sqlstore.Tx, st sqlstore.Stmt) (int64, error) {
	rows, err := e.Query(ctx, st.SQL, st.Args...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	if !rows.Next() {
		return 0, rows.Err()
	}
	if err := rows.Scan(st.Dest...); err != nil {
		return 0, err
	}
	rows.Close()
	return 1, rows.Err()
}

// scanEach reads every row of st with st.Each and counts them.
func scanEach(ctx context.Context, e sqlstore.Tx, st sqlstore.Stmt) (int64, error) {
	rows, err := e.Query(ctx, st.SQL, st.Args...)
	if err != nil {
		return 0, err
	}
	return sqlstore.EachRow(rows, st.Each)
}

// sqlRows are a query's rows.
type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }

// Migrate applies Hallmark's pending migrations (not River's).
func Migrate(ctx context.Context, db *sql.DB) ([]int, error) {
	return sqlstore.Migrate(ctx, Conn(db), sqlstore.SQLite)
}

// MigrationStatus reports applied and pending versions.
func MigrationStatus(ctx context.Context, db *sql.DB) (sqlstore.MigrationStatus, error) {
	return sqlstore.Status(ctx, Conn(db), sqlstore.SQLite)
}
