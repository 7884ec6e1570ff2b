package jobs_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"modernc.org/sqlite"
)

// liteStats counts the statements a SQLite handle runs, by River's sqlc
// query name where there is one: SQLite has no pg_stat_statements, so
// benchmarks count at the driver instead. There is no execution time to
// report; the process's CPU time stands in for it.
type liteStats struct {
	mu    sync.Mutex
	calls map[string]int64
}

// openCounted opens another handle on the SQLite file at path, set up as
// openEnv sets one up, whose statements st counts.
func openCounted(tb testing.TB, path string) (*sql.DB, *liteStats) {
	tb.Helper()
	base, err := sqlite.NewConnector("file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	if err != nil {
		tb.Fatalf("opening %s: %v", path, err)
	}
	st := &liteStats{calls: map[string]int64{}}
	db := sql.OpenDB(countingConnector{base, st})
	db.SetMaxOpenConns(1)
	tb.Cleanup(func() { _ = db.Close() })
	return db, st
}

func (s *liteStats) count(query string) {
	name := query
	if m := sqlcName.FindStringSubmatch(query); m != nil {
		name = m[1]
	} else if len(name) > 70 {
		name = name[:70]
	}
	s.mu.Lock()
	s.calls[name]++
	s.mu.Unlock()
}

func (s *liteStats) reset() {
	s.mu.Lock()
	clear(s.calls)
	s.mu.Unlock()
}

// read returns the counts since the last reset, most called first, in the
// form report prints (no execution time).
func (s *liteStats) read() []stmt {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]stmt, 0, len(s.calls))
	for name, n := range s.calls {
		out = append(out, stmt{name: name, calls: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].calls > out[j].calls })
	return out
}

type countingConnector struct {
	driver.Connector
	st *liteStats
}

func (c countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return countingConn{conn, c.st}, nil
}

// countingConn forwards every optional interface modernc's connection
// implements (sqlite.NewConnector lists them), counting as it goes.
type countingConn struct {
	driver.Conn
	st *liteStats
}

func (c countingConn) Unwrap() driver.Conn { return c.Conn }

func (c countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	c.st.count("BEGIN")
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c countingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	c.st.count(query)
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

func (c countingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	c.st.count(query)
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
}

func (c countingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	c.st.count(query)
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
}

func (c countingConn) Ping(ctx context.Context) error {
	return c.Conn.(driver.Pinger).Ping(ctx)
}

func (c countingConn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (c countingConn) IsValid() bool { return c.Conn.(driver.Validator).IsValid() }

// cpuTime is the process's user and system CPU time so far.
func cpuTime(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
