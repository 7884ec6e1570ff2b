package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// NewLazyTx lets the external tests drive a lazyTx on a connection of
// their own.
func NewLazyTx(c *pgx.Conn) pgx.Tx { return &lazyTx{conn: c} }

// CommitWith is lazyTx.commitWith for the external tests.
func CommitWith(ctx context.Context, tx pgx.Tx, b *pgx.Batch) pgx.BatchResults {
	return tx.(*lazyTx).commitWith(ctx, b)
}

// SendAhead is lazyTx.sendAhead for the external tests.
func SendAhead(tx pgx.Tx, b *pgx.Batch, read func(pgx.BatchResults) error) {
	tx.(*lazyTx).sendAhead(b, read)
}

// CommitWithInsert is lazyTx.commitWithInsert for the external tests.
func CommitWithInsert(tx pgx.Tx, queue string) (disarm func()) {
	return tx.(*lazyTx).commitWithInsert(queue)
}

// RiverInsertSQL begins River's job insert statement.
const RiverInsertSQL = riverInsertSQL
