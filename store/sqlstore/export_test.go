package sqlstore

import "context"

// Send runs stmts on raw, a transaction of c, as the store sends a batch
// (txn.send): tokens expanded, the failure mapped to the store's sentinels.
func Send(ctx context.Context, c Conn, d *Dialect, raw Tx, stmts []Stmt) ([]int64, error) {
	b := batch{stmts: stmts, what: make([]string, len(stmts))}
	return (&txn{raw: raw, d: d, c: c}).send(ctx, &b)
}

// RateCertificatesSQL is the statement RateCertificates runs, as d runs
// it: $1 the window in microseconds (negative), $2 the domain.
func RateCertificatesSQL(d *Dialect) string { return d.SQL(rateCertificatesSQL) }
