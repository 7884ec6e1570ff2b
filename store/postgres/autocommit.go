package postgres

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/store/sqlstore"
)

// Autocommit runs fn on one pooled connection with no BEGIN or COMMIT:
// each statement is its own transaction (sqlstore.Autocommitter).
func (c conn) Autocommit(ctx context.Context, fn func(sqlstore.Tx) error) error {
	pc, err := c.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer pc.Release()
	return fn(pgAuto{pc})
}

type pgAuto struct{ c *pgxpool.Conn }

func (t pgAuto) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := t.c.Exec(ctx, q, args...)
	return tag.RowsAffected(), err
}

func (t pgAuto) Query(ctx context.Context, q string, args ...any) (sqlstore.Rows, error) {
	rows, err := t.c.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// Batch sends stmts as one pgx batch: PostgreSQL runs it as one implicit
// transaction.
func (t pgAuto) Batch(ctx context.Context, stmts []sqlstore.Stmt) ([]int64, error) {
	return sendBatch(ctx, t.c.SendBatch, stmts)
}

// BatchMeanwhile is Batch with meanwhile run after the batch has gone to
// the server and before its results are read: the caller's work and the
// database's overlap, on the caller's goroutine.
func (t pgAuto) BatchMeanwhile(ctx context.Context, stmts []sqlstore.Stmt, meanwhile func()) ([]int64, error) {
	return sendBatchMeanwhile(ctx, t.c.SendBatch, stmts, meanwhile)
}

// Raw is nil: jobs are only ever inserted inside a transaction.
func (t pgAuto) Raw() jobs.Tx { return nil }
