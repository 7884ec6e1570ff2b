package sqlite

import (
	"context"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/store/sqlstore"
)

// Autocommit runs fn's statements outside a transaction, so a read takes
// only a WAL read lock instead of queuing for the write lock that BEGIN
// IMMEDIATE takes (sqlstore.Autocommitter); its SELECTs run on the
// read-only pool where the store has one (readers.go).
func (c conn) Autocommit(ctx context.Context, fn func(sqlstore.Tx) error) error {
	return fn(sqlAuto{c})
}

type sqlAuto struct{ c conn }

func (t sqlAuto) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := t.c.db.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (t sqlAuto) Query(ctx context.Context, q string, args ...any) (sqlstore.Rows, error) {
	h := t.c.db
	if t.c.rd != nil && readOnly(q) {
		h = t.c.rd // readers.go
	}
	rows, err := h.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{Rows: rows}, nil
}

// Batch runs stmts one after another, each committing alone.
func (t sqlAuto) Batch(ctx context.Context, stmts []sqlstore.Stmt) ([]int64, error) {
	return runEach(ctx, t, stmts)
}

// Raw is nil: jobs are only ever inserted inside a transaction.
func (t sqlAuto) Raw() jobs.Tx { return nil }
