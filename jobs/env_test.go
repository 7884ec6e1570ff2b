package jobs_test

// The test databases: one real PostgreSQL database or one SQLite file per
// test, reached through a tiny SQL seam so each test is written once and run
// on both dialects.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	_ "modernc.org/sqlite"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

var dialects = []string{"postgres", "sqlite"}

// sqlDB is a database handle; queries use ? placeholders on both dialects.
type sqlDB interface {
	Exec(ctx context.Context, q string, args ...any) error
	Scan(ctx context.Context, q string, args []any, dest ...any) error
	Strings(ctx context.Context, q string, args ...any) ([]string, error)
	Begin(ctx context.Context) (sqlTx, error)
}

type sqlTx interface {
	Exec(ctx context.Context, q string, args ...any) error
	Scan(ctx context.Context, q string, args []any, dest ...any) error
	Tx() jobs.Tx
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// rebind turns ? placeholders into PostgreSQL's $n.
func rebind(q string) string {
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

type pgDB struct{ pool *pgxpool.Pool }

func (d pgDB) Exec(ctx context.Context, q string, args ...any) error {
	_, err := d.pool.Exec(ctx, rebind(q), args...)
	return err
}

func (d pgDB) Scan(ctx context.Context, q string, args []any, dest ...any) error {
	return d.pool.QueryRow(ctx, rebind(q), args...).Scan(dest...)
}

func (d pgDB) Strings(ctx context.Context, q string, args ...any) ([]string, error) {
	rows, err := d.pool.Query(ctx, rebind(q), args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

func (d pgDB) Begin(ctx context.Context) (sqlTx, error) {
	tx, err := d.pool.Begin(ctx)
	return pgTx{tx}, err
}

type pgTx struct{ tx pgx.Tx }

func (t pgTx) Exec(ctx context.Context, q string, args ...any) error {
	_, err := t.tx.Exec(ctx, rebind(q), args...)
	return err
}

func (t pgTx) Scan(ctx context.Context, q string, args []any, dest ...any) error {
	return t.tx.QueryRow(ctx, rebind(q), args...).Scan(dest...)
}
func (t pgTx) Tx() jobs.Tx                        { return t.tx }
func (t pgTx) Commit(ctx context.Context) error   { return t.tx.Commit(ctx) }
func (t pgTx) Rollback(ctx context.Context) error { return t.tx.Rollback(ctx) }

type liteDB struct{ db *sql.DB }

func (d liteDB) Exec(ctx context.Context, q string, args ...any) error {
	_, err := d.db.ExecContext(ctx, q, args...)
	return err
}

func (d liteDB) Scan(ctx context.Context, q string, args []any, dest ...any) error {
	return d.db.QueryRowContext(ctx, q, args...).Scan(dest...)
}

func (d liteDB) Strings(ctx context.Context, q string, args ...any) ([]string, error) {
	rows, err := d.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func (d liteDB) Begin(ctx context.Context) (sqlTx, error) {
	tx, err := d.db.BeginTx(ctx, nil)
	return liteTx{tx}, err
}

type liteTx struct{ tx *sql.Tx }

func (t liteTx) Exec(ctx context.Context, q string, args ...any) error {
	_, err := t.tx.ExecContext(ctx, q, args...)
	return err
}

func (t liteTx) Scan(ctx context.Context, q string, args []any, dest ...any) error {
	return t.tx.QueryRowContext(ctx, q, args...).Scan(dest...)
}
func (t liteTx) Tx() jobs.Tx                    { return t.tx }
func (t liteTx) Commit(context.Context) error   { return t.tx.Commit() }
func (t liteTx) Rollback(context.Context) error { return t.tx.Rollback() }

// env is one test database: its dialect, where to reach it (a PostgreSQL URL
// or a SQLite file path, also handed to child processes), and a first handle.
type env struct {
	dialect string
	url     string
	db      sqlDB
	q       jobs.Queue
}

const testSchema = `
CREATE TABLE subjects (id TEXT PRIMARY KEY, state TEXT NOT NULL, problem TEXT NOT NULL DEFAULT '', updated_ms BIGINT NOT NULL DEFAULT 0);
CREATE TABLE runs (job_key TEXT PRIMARY KEY, worker TEXT NOT NULL);
CREATE TABLE verdicts (id TEXT PRIMARY KEY)`

func newEnv(t testing.TB, dialect string) *env {
	t.Helper()
	e := &env{dialect: dialect}
	switch dialect {
	case "postgres":
		e.url = testdb.Postgres(t)
	case "sqlite":
		e.url = strings.TrimPrefix(testdb.SQLite(t), "sqlite:")
	}
	e.db, e.q = openEnv(t, dialect, e.url)
	ctx := context.Background()
	if err := e.q.Migrate(ctx); err != nil {
		t.Fatalf("migrating river: %v", err)
	}
	for _, stmt := range strings.Split(testSchema, ";") {
		if err := e.db.Exec(ctx, stmt); err != nil {
			t.Fatalf("creating test tables: %v", err)
		}
	}
	return e
}

// open returns another handle on the env's database: another "process".
func (e *env) open(t testing.TB) (sqlDB, jobs.Queue) { return openEnv(t, e.dialect, e.url) }

func openEnv(t testing.TB, dialect, url string) (sqlDB, jobs.Queue) {
	t.Helper()
	switch dialect {
	case "postgres":
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			t.Fatalf("parsing %s: %v", url, err)
		}
		// Tests run beside other packages' tests on one PostgreSQL
		// (max_connections 100 by default), and the multi-process tests
		// open four handles: 8 connections each (and up to 6 more for each
		// started worker's runner pool) keeps them well inside it.
		// Benchmarks keep 20, the figures docs/performance.md quotes.
		cfg.MaxConns = 8
		if _, bench := t.(*testing.B); bench {
			cfg.MaxConns = 20
		}
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatalf("opening %s: %v", url, err)
		}
		t.Cleanup(pool.Close)
		return pgDB{pool}, jobs.NewPostgres(pool)
	case "sqlite":
		db, err := sql.Open("sqlite", "file:"+url+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate")
		if err != nil {
			t.Fatalf("opening %s: %v", url, err)
		}
		db.SetMaxOpenConns(1)
		t.Cleanup(func() { _ = db.Close() })
		return liteDB{db}, jobs.NewSQLite(db)
	}
	t.Fatalf("unknown dialect %q", dialect)
	return nil, nil
}

// start runs a worker client and stops it when the test ends.
func start(t testing.TB, q jobs.Queue, reg *jobs.Registry, s jobs.Settings) jobs.Runner {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r, err := q.Start(ctx, reg, s)
	if err != nil {
		cancel()
		t.Fatalf("starting worker: %v", err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer scancel()
		if err := r.Stop(sctx); err != nil {
			t.Errorf("stopping worker: %v", err)
		}
		cancel()
	})
	return r
}

// testQueue is the queue the tests' jobs go to.
const testQueue = "test"

// workArgs is a test job on a subject.
type workArgs struct {
	Key      string `json:"key" river:"unique"`
	Attempts int    `json:"attempts,omitempty"` // max attempts; 0 = default
}

func (workArgs) Kind() string { return "test_work" }

func (a workArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{
		Queue:       testQueue,
		MaxAttempts: a.Attempts,
		UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
			rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRetryable,
			rivertype.JobStateRunning, rivertype.JobStateScheduled,
		}},
	}
}

func (a workArgs) SubjectOf() jobs.Subject { return jobs.Subject{Kind: "test_work", ID: a.Key} }

// subjects is the Subjects seam over the test's own table.
type subjects struct {
	db sqlDB
	q  jobs.Queue
}

func (s subjects) Stranded(ctx context.Context, olderThan time.Time) ([]jobs.Subject, error) {
	// The real store also checks for an outstanding job; this table never
	// has one when a test leaves a subject processing.
	ids, err := s.db.Strings(ctx, "SELECT id FROM subjects WHERE state = 'processing' AND updated_ms < ?", olderThan.UnixMilli())
	if err != nil {
		return nil, err
	}
	var out []jobs.Subject
	for _, id := range ids {
		out = append(out, jobs.Subject{Kind: "test_work", ID: id})
	}
	return out, nil
}

func (s subjects) Requeue(ctx context.Context, sub jobs.Subject) error {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := tx.Exec(ctx, "UPDATE subjects SET updated_ms = ? WHERE id = ?", time.Now().UnixMilli(), sub.ID); err != nil {
		return err
	}
	if _, _, err := s.q.Inserter().InsertTx(ctx, tx.Tx(), workArgs{Key: sub.ID}); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func (s subjects) Abandon(ctx context.Context, sub jobs.Subject, p acme.Problem) (bool, error) {
	var n int
	if err := s.db.Scan(ctx, "SELECT count(*) FROM subjects WHERE id = ? AND state = 'processing'", []any{sub.ID}, &n); err != nil {
		return false, err
	}
	return n > 0, s.db.Exec(ctx, "UPDATE subjects SET state = 'invalid', problem = ? WHERE id = ? AND state = 'processing'", string(p.Type), sub.ID)
}

// enqueue inserts a processing subject and its job in one transaction.
func enqueue(t testing.TB, db sqlDB, q jobs.Queue, args workArgs) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := tx.Exec(ctx, "INSERT INTO subjects (id, state, updated_ms) VALUES (?, 'processing', ?)", args.Key, time.Now().UnixMilli()); err != nil {
		t.Fatalf("inserting subject: %v", err)
	}
	if _, _, err := q.Inserter().InsertTx(ctx, tx.Tx(), args); err != nil {
		t.Fatalf("inserting job: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

// jobFor finds the one job of a subject key.
func jobFor(t testing.TB, q jobs.Queue, key string) jobs.JobInfo {
	t.Helper()
	list, err := jobs.List(context.Background(), q, jobs.ListFilter{Kinds: []string{"test_work"}, Limit: 10000})
	if err != nil {
		t.Fatalf("listing jobs: %v", err)
	}
	var found []jobs.JobInfo
	for _, j := range list {
		if strings.Contains(string(j.Args), fmt.Sprintf("%q", key)) {
			found = append(found, j)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want 1 job for %s, found %d", key, len(found))
	}
	return found[0]
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil && !errors.Is(err, sql.ErrNoRows) && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func count(t testing.TB, db sqlDB, q string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.Scan(context.Background(), q, args, &n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// fast is the settings tests run with: quick polling and retries.
func fast(db sqlDB, q jobs.Queue, id string) jobs.Settings {
	return jobs.Settings{
		WorkerID:          id,
		Queues:            []string{testQueue},
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		RetryBase:         20 * time.Millisecond,
		RetryMax:          time.Second,
		Subjects:          subjects{db: db, q: q},
	}
}
