package postgres

import "github.com/jackc/pgx/v5"

// NewLazyTx lets the external tests drive a lazyTx on a connection of
// their own.
func NewLazyTx(c *pgx.Conn) pgx.Tx { return &lazyTx{conn: c} }
