package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCache keeps the store's statements prepared. database/sql runs a
// query with arguments by preparing, running and closing it, and SQLite
// parses the text at every prepare: parsing was a quarter of a busy
// frontend's CPU on SQLite. The store's queries are constants (and a
// bounded set of multi-row shapes), so the cache is bounded by the source.
//
// Only statements with arguments are cached: a migration is a script of
// several statements without arguments, and Prepare would take only the
// first.
//
// The handle has one connection (Open). A statement is prepared on the
// handle only while this goroutine does not hold that connection: first
// seen inside a transaction, it runs unprepared and is prepared after the
// transaction ends (prepareWanted); preparing it inside would wait for the
// connection the transaction holds.
type stmtCache struct {
	db     *sql.DB
	mu     sync.Mutex
	m      map[string]*sql.Stmt
	wanted map[string]bool
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, m: map[string]*sql.Stmt{}, wanted: map[string]bool{}}
}

// inTx returns q's prepared statement, or nil after noting q for
// prepareWanted.
func (c *stmtCache) inTx(q string, args []any) *sql.Stmt {
	if len(args) == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.m[q]
	if st == nil {
		c.wanted[q] = true
	}
	return st
}

// outside returns q's prepared statement, preparing it now if need be; nil
// when q has no arguments or does not prepare (the caller runs it as text
// and gets the error there).
func (c *stmtCache) outside(ctx context.Context, q string, args []any) *sql.Stmt {
	if len(args) == 0 {
		return nil
	}
	c.mu.Lock()
	st := c.m[q]
	c.mu.Unlock()
	if st != nil {
		return st
	}
	return c.prepare(ctx, q)
}

// prepareWanted prepares the statements first seen inside transactions.
func (c *stmtCache) prepareWanted(ctx context.Context) {
	c.mu.Lock()
	if len(c.wanted) == 0 {
		c.mu.Unlock()
		return
	}
	qs := make([]string, 0, len(c.wanted))
	for q := range c.wanted {
		qs = append(qs, q)
	}
	clear(c.wanted)
	c.mu.Unlock()
	for _, q := range qs {
		c.prepare(ctx, q)
	}
}

func (c *stmtCache) prepare(ctx context.Context, q string) *sql.Stmt {
	st, err := c.db.PrepareContext(ctx, q)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.m[q]; old != nil {
		_ = st.Close()
		return old
	}
	c.m[q] = st
	return st
}

// txExec and txQuery run q on tx, through its prepared statement when
// there is one.
func (c *stmtCache) txExec(ctx context.Context, tx *sql.Tx, q string, args []any) (sql.Result, error) {
	st := c.inTx(q, args)
	if st == nil {
		return tx.ExecContext(ctx, q, args...)
	}
	ts := tx.StmtContext(ctx, st)
	defer ts.Close()
	return ts.ExecContext(ctx, args...)
}

func (c *stmtCache) txQuery(ctx context.Context, tx *sql.Tx, q string, args []any) (*sql.Rows, func(), error) {
	st := c.inTx(q, args)
	if st == nil {
		rows, err := tx.QueryContext(ctx, q, args...)
		return rows, func() {}, err
	}
	ts := tx.StmtContext(ctx, st)
	rows, err := ts.QueryContext(ctx, args...)
	if err != nil {
		_ = ts.Close()
		return nil, nil, err
	}
	return rows, func() { _ = ts.Close() }, nil
}
