package open

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/postgres"
	"github.com/hallmark-ca/hallmark/store/redact"
	"github.com/hallmark-ca/hallmark/store/sqlite"
	"github.com/hallmark-ca/hallmark/store/sqlstore"
)

// Config names the database, [database]. URL is "postgres://..." or
// "sqlite:<path>"; HALLMARK_DATABASE_URL, if set, replaces it.
type Config struct {
	URL string `toml:"url"`
	// MaxConns bounds each process's PostgreSQL pool; 0, the default, is
	// four per CPU the process may use (store/postgres.DefaultConns).
	MaxConns int `toml:"max_conns"`
}

// Validate reports every problem of [database], each naming its key.
func (c Config) Validate() error {
	var errs []error
	switch {
	case strings.HasPrefix(c.URL, "postgres://"), strings.HasPrefix(c.URL, "postgresql://"):
	case strings.HasPrefix(c.URL, "sqlite:") && len(c.URL) > len("sqlite:"):
	default:
		errs = append(errs, fmt.Errorf("database.url: must be postgres://... or sqlite:<path>, got %q", redact.URL(c.URL)))
	}
	if c.MaxConns < 0 {
		errs = append(errs, errors.New("database.max_conns: must not be negative (0 picks the driver's default)"))
	}
	return errors.Join(errs...)
}

// MigrationStatus is where a database stands against this binary's
// migrations (Hallmark's own; River tracks its own).
type MigrationStatus = sqlstore.MigrationStatus

// DB is one database opened for Hallmark: the store and the queue share
// its handle, so a job inserted by the store commits with the store's rows.
type DB struct {
	Store   store.Store
	Queue   jobs.Queue
	Dialect string // "postgres" or "sqlite"

	conn    sqlstore.Conn
	dialect *sqlstore.Dialect
	advice  func(context.Context) ([]string, error) // nil: nothing to check
	backup  func(ctx context.Context, path string) (Backup, error)
}

// Backup is what DB.Backup wrote.
type Backup = sqlite.Backup

// ErrBackupElsewhere is DB.Backup's answer on PostgreSQL, whose own tools
// back it up better than a copy through one connection could.
var ErrBackupElsewhere = errors.New("hallmark backup copies the embedded SQLite database; back up PostgreSQL with its own tools: pg_dump for a copy, or pg_basebackup with WAL archiving to lose nothing since the last copy (docs/operations.md, Backups)")

// Open connects to url ("postgres://..." or "postgresql://...", or
// "sqlite:<path>", whose directory is created). maxConns bounds a
// PostgreSQL pool (0: postgres.DefaultConns); SQLite always writes on one
// connection and reads outside transactions on a small read-only pool
// (sqlite.OpenReaders). It
// refuses (store.ErrTooNew) a database migrated by a newer Hallmark.
func Open(ctx context.Context, url string, maxConns int) (*DB, error) {
	db, err := open(ctx, url, maxConns)
	if err != nil {
		return nil, err
	}
	if _, err := db.MigrationStatus(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

func open(ctx context.Context, url string, maxConns int) (*DB, error) {
	switch {
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		pool, err := postgres.Connect(ctx, url, maxConns)
		if err != nil {
			return nil, err
		}
		return fromPool(pool), nil
	case strings.HasPrefix(url, "sqlite:"):
		path := strings.TrimPrefix(url, "sqlite:")
		path = strings.TrimPrefix(path, "//") // sqlite:///abs/path
		if path == "" {
			return nil, errors.New("opening the database: the URL sqlite: names no file; use sqlite:<path>")
		}
		db, err := sqlite.Open(path)
		if err != nil {
			return nil, err
		}
		readers, err := sqlite.OpenReaders(path)
		if err != nil {
			db.Close()
			return nil, err
		}
		return fromSQL(db, readers, path), nil
	}
	return nil, fmt.Errorf("opening the database: URL %q is neither postgres://... nor sqlite:<path>", redact.URL(url))
}

func fromPool(pool *pgxpool.Pool) *DB {
	q := jobs.NewPostgres(pool)
	return &DB{
		Store:   postgres.New(pool, q.Inserter()),
		Queue:   q,
		Dialect: sqlstore.Postgres.Name,
		conn:    postgres.Conn(pool),
		dialect: sqlstore.Postgres,
		advice:  func(ctx context.Context) ([]string, error) { return postgres.Advice(ctx, pool) },
	}
}

func fromSQL(db, readers *sql.DB, path string) *DB {
	q := jobs.NewSQLiteRunner(db, func() (*sql.DB, error) { return sqlite.OpenJobRunner(path) })
	return &DB{
		Store:   sqlite.NewWithReaders(db, readers, q.Inserter()),
		Queue:   q,
		Dialect: sqlstore.SQLite.Name,
		conn:    sqlite.Conn(db),
		dialect: sqlstore.SQLite,
		backup:  func(ctx context.Context, to string) (Backup, error) { return sqlite.BackupTo(ctx, db, path, to) },
		advice:  func(context.Context) ([]string, error) { return sqlite.Advice(path) },
	}
}

// Backup writes a consistent copy of an SQLite database to path while it
// is in use (sqlite.BackupTo); ErrBackupElsewhere for PostgreSQL.
func (db *DB) Backup(ctx context.Context, path string) (Backup, error) {
	if db.backup == nil {
		return Backup{}, ErrBackupElsewhere
	}
	return db.backup(ctx, path)
}

// Advice is what an operator should change about the database, one
// sentence each: PostgreSQL's settings that lose certificates on a crash
// or slow issuance as the tables grow (postgres.Advice); for SQLite,
// whose pragmas Hallmark sets itself, a file other users may read
// (sqlite.Advice).
func (db *DB) Advice(ctx context.Context) ([]string, error) {
	if db.advice == nil {
		return nil, nil
	}
	return db.advice(ctx)
}

// Close closes the store and its handle.
func (db *DB) Close() {
	_ = db.Store.Close()
}

// Migrate applies Hallmark's pending migrations and then River's.
func (db *DB) Migrate(ctx context.Context) error {
	if _, err := sqlstore.Migrate(ctx, db.conn, db.dialect); err != nil {
		return err
	}
	return db.Queue.Migrate(ctx)
}

// Release names the binary that migrates a database, as it reports
// itself; ReleaseRecord is one that did (schema_releases, migration 15).
type (
	Release       = sqlstore.Release
	ReleaseRecord = sqlstore.ReleaseRecord
)

// RecordRelease notes that rel migrated the database, unless the newest
// record already names rel at the current schema version; it reports
// whether it added one. `hallmark migrate` calls it after Migrate;
// MigrationStatus's MigratedBy reads it back.
func (db *DB) RecordRelease(ctx context.Context, rel Release) (bool, error) {
	return sqlstore.RecordRelease(ctx, db.conn, db.dialect, rel)
}

// MigrationStatus reports Hallmark's applied and pending migrations;
// store.ErrTooNew (with the status filled in) when the database has a
// version this binary does not know.
func (db *DB) MigrationStatus(ctx context.Context) (MigrationStatus, error) {
	return sqlstore.Status(ctx, db.conn, db.dialect)
}

// Migrate opens url, applies Hallmark's and River's migrations, and closes
// it: `hallmark migrate`.
func Migrate(ctx context.Context, url string) error {
	db, err := Open(ctx, url, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.Migrate(ctx)
}

// Status opens url and reports its migration status without the ErrTooNew
// refusal of Open, so `hallmark migrate status` can show a newer database;
// the error is still store.ErrTooNew then.
func Status(ctx context.Context, url string) (MigrationStatus, error) {
	db, err := open(ctx, url, 2)
	if err != nil {
		return MigrationStatus{}, err
	}
	defer db.Close()
	return db.MigrationStatus(ctx)
}

// NotifyRoute makes the store queue a notify_send job per destination of
// each event it writes ([notify]; notify.Config.Route), in the write's
// own transaction. Call it before the store is used.
func (db *DB) NotifyRoute(route func(event string) []string) {
	if s, ok := db.Store.(interface{ NotifyRoute(func(string) []string) }); ok {
		s.NotifyRoute(route)
	}
}
