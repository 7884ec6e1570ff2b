package sqlstore

import (
	"context"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// ReusableSQL is the statement AuthzsReusable (and a LookupReusable) runs
// for keys, methods and minExpiry, as d runs it, with its arguments.
func ReusableSQL(d *Dialect, accountID string, keys []store.AuthzKey, methods []acme.ChallengeType, minExpiry time.Time) (string, []any) {
	q, args := (&Store{d: d}).reusableSQL(accountID, keys, methods, minExpiry)
	return d.SQL(q), args
}

// Send runs stmts on raw, a transaction of c, as the store sends a batch
// (txn.send): tokens expanded, the failure mapped to the store's sentinels.
func Send(ctx context.Context, c Conn, d *Dialect, raw Tx, stmts []Stmt) ([]int64, error) {
	b := batch{stmts: stmts, what: make([]string, len(stmts))}
	return (&txn{raw: raw, d: d, c: c}).send(ctx, &b)
}

// RateCertificatesSQL is the statement RateCertificates runs, as d runs
// it: $1 the window in microseconds (negative), $2 the domain.
func RateCertificatesSQL(d *Dialect) string { return d.SQL(rateCertificatesSQL) }

// OrderFindingSQL are the statements that find an authorization's orders
// on the verdict's path and AuthzDeactivate's, by name, as d runs them:
// $1 is the challenge (verdict) or the authorization (deactivate), $2 a
// problem text where one is set.
func OrderFindingSQL(d *Dialect) map[string]string {
	out := map[string]string{}
	for name, q := range map[string]string{
		"verdict: lock the orders":              verdictLockSQL,
		"verdict valid: orders to ready":        verdictReadySQL,
		"verdict invalid: sibling challenges":   verdictSiblingsSQL,
		"verdict invalid: orders to invalid":    verdictInvalidSQL,
		"deactivate: lock the orders":           ordersUsing,
		"deactivate: unfinished orders invalid": authzDeactivateOrdersSQL,
	} {
		out[name] = d.SQL(q)
	}
	return out
}

// ChallengeClaimSignedSQL is ChallengeClaimSigned's swap, as d runs it:
// $1 the challenge, $2 the account.
func ChallengeClaimSignedSQL(d *Dialect) string {
	return d.SQL(challengeClaimSignedSQL + challengeCols)
}

// CertInsertSQL is the statement that stores an issued certificate from
// its order (queueCertificate), as d runs it.
func CertInsertSQL(d *Dialect) string { return d.SQL(certInsertSQL) }

// ReplaceSQL is the statement that marks a certificate replaced (ARI's
// replaces, in OrderCreate), as d runs it: $1 the serial, $2 the account,
// $3 the replacing order.
func ReplaceSQL(d *Dialect) string { return d.SQL(replaceSQL) }

// ExpireOrdersSQL is ExpirePending's orders statement, as d runs it: $1 the
// problem text.
func ExpireOrdersSQL(d *Dialect) string { return d.SQL(expireOrdersSQL) }
