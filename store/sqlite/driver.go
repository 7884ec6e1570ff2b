package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"

	_ "modernc.org/sqlite" // registers "sqlite", the driver this one wraps
)

// driverName is modernc.org/sqlite with a statement cache on each
// connection. database/sql runs a query with arguments by preparing,
// running and closing it, and SQLite parses the text at every prepare: on
// a frontend at one request at a time, parsing River's job insert alone was
// 15% of the CPU, and the store's own statements more before they were
// cached. Caching at the connection covers every caller of the handle —
// the store, River's inserts, fetches and completions — inside transactions
// and out.
//
// Every statement is cached, with or without arguments: modernc runs a
// prepared script of several statements (a migration) whole, each time
// (TestStmtCache). A statement whose rows are still open when the same text
// runs again (a query inside its own loop) runs unprepared that time. The
// cache holds at most maxCachedStmts per connection: the statements are
// constants in the source, plus a bounded set of multi-row shapes.
const driverName = "sqlite-hallmark"

const maxCachedStmts = 512

func init() {
	// The registered modernc driver, without connecting to anything.
	db, err := sql.Open("sqlite", "")
	if err != nil {
		panic("modernc.org/sqlite is not registered: " + err.Error())
	}
	moderncDriver = db.Driver()
	_ = db.Close()
	sql.Register(driverName, cachingDriver{inner: moderncDriver, opaqueLimits: true})
}

// moderncDriver is the driver cachingDriver wraps.
var moderncDriver driver.Driver

type cachingDriver struct {
	inner        driver.Driver
	opaqueLimits bool // prepare with each bound LIMIT hidden from the planner (limit.go)
}

// innerConn is what the cache needs of modernc's connection; Open refuses
// a connection without it rather than silently losing an interface.
type innerConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

func (d cachingDriver) Open(name string) (driver.Conn, error) {
	c, err := d.inner.Open(name)
	if err != nil {
		return nil, err
	}
	ic, ok := c.(innerConn)
	if !ok {
		_ = c.Close()
		return nil, fmt.Errorf("the SQLite driver's connection (%s) lacks an interface the statement cache forwards", reflect.TypeOf(c))
	}
	return &cachingConn{innerConn: ic, stmts: map[string]*cachedStmt{}, opaqueLimits: d.opaqueLimits}, nil
}

type cachingConn struct {
	innerConn
	mu       sync.Mutex
	stmts    map[string]*cachedStmt
	prepares int // statements prepared for the cache, for tests

	opaqueLimits bool // cachingDriver's

	// uninterrupted: a statement whose caller's context ends while it runs
	// runs to its end. Set while a group of transactions shares this
	// connection (group.go), where an interrupted write would make SQLite
	// roll back the whole shared transaction, every member's work with it.
	// A caller whose context has ended still runs no further statement:
	// database/sql checks the context before each one.
	uninterrupted atomic.Bool
}

// statementContext is the context ctx's statement runs on.
func (c *cachingConn) statementContext(ctx context.Context) context.Context {
	if c.uninterrupted.Load() {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

type cachedStmt struct {
	st   stmt
	busy bool // running, or its rows are open
}

type stmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

// take returns q's cached statement marked busy, preparing it if need be,
// or nil when q is to run unprepared (busy, the cache full, or it does not
// prepare).
func (c *cachingConn) take(ctx context.Context, q string) *cachedStmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cs := c.stmts[q]; cs != nil {
		if cs.busy {
			return nil
		}
		cs.busy = true
		return cs
	}
	if len(c.stmts) >= maxCachedStmts {
		return nil
	}
	prepared := q
	if c.opaqueLimits {
		prepared = opaqueLimits(q)
	}
	ds, err := c.innerConn.PrepareContext(ctx, prepared)
	if err != nil {
		return nil // unprepared, it fails again with the error its caller sees
	}
	st, ok := ds.(stmt)
	if !ok {
		_ = ds.Close()
		return nil
	}
	c.prepares++
	cs := &cachedStmt{st: st, busy: true}
	c.stmts[q] = cs
	return cs
}

func (c *cachingConn) release(cs *cachedStmt) {
	c.mu.Lock()
	cs.busy = false
	c.mu.Unlock()
}

func (c *cachingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	ctx = c.statementContext(ctx)
	cs := c.take(ctx, q)
	if cs == nil {
		return c.innerConn.ExecContext(ctx, q, args)
	}
	defer c.release(cs)
	return cs.st.ExecContext(ctx, args)
}

func (c *cachingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	ctx = c.statementContext(ctx)
	cs := c.take(ctx, q)
	if cs == nil {
		return c.innerConn.QueryContext(ctx, q, args)
	}
	rows, err := cs.st.QueryContext(ctx, args)
	if err != nil {
		c.release(cs)
		return nil, err
	}
	return &cachedRows{Rows: rows, done: func() { c.release(cs) }}, nil
}

// Close finalizes the cached statements before the connection.
func (c *cachingConn) Close() error {
	c.mu.Lock()
	for q, cs := range c.stmts {
		_ = cs.st.Close()
		delete(c.stmts, q)
	}
	c.mu.Unlock()
	return c.innerConn.Close()
}

// cachedRows frees their statement for reuse when closed. The column-type
// interfaces are modernc's, forwarded.
type cachedRows struct {
	driver.Rows
	done func()
	once sync.Once
}

func (r *cachedRows) Close() error {
	err := r.Rows.Close()
	r.once.Do(r.done)
	return err
}

func (r *cachedRows) ColumnTypeDatabaseTypeName(i int) string {
	if t, ok := r.Rows.(driver.RowsColumnTypeDatabaseTypeName); ok {
		return t.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

func (r *cachedRows) ColumnTypeScanType(i int) reflect.Type {
	if t, ok := r.Rows.(driver.RowsColumnTypeScanType); ok {
		return t.ColumnTypeScanType(i)
	}
	return reflect.TypeFor[any]()
}

func (r *cachedRows) ColumnTypeNullable(i int) (nullable, ok bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypeNullable); ok {
		return t.ColumnTypeNullable(i)
	}
	return false, false
}

func (r *cachedRows) ColumnTypeLength(i int) (int64, bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypeLength); ok {
		return t.ColumnTypeLength(i)
	}
	return 0, false
}

func (r *cachedRows) ColumnTypePrecisionScale(i int) (precision, scale int64, ok bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypePrecisionScale); ok {
		return t.ColumnTypePrecisionScale(i)
	}
	return 0, 0, false
}
