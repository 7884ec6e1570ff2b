package sqlstore

import (
	"context"
	"fmt"
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

// CustomPlansSQL is what a transaction of d runs before statements it
// plans for their arguments (txn.customPlans): RevokeMany's, RevokedCount's
// and AuthzDeactivate's.
func CustomPlansSQL(d *Dialect) string { return d.customPlans }

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

// ChallengeClaimSignedSQL is ChallengeClaim's swap, as d runs it: $1 the
// challenge, $2 the account.
func ChallengeClaimSignedSQL(d *Dialect) string {
	return d.SQL(challengeClaimSQL + challengeCols)
}

// OrderIssuedSQL is OrderIssued's compare-and-swap, as d runs it: $1 the
// order, $2 the serial.
func OrderIssuedSQL(d *Dialect) string { return d.SQL(orderIssuedSQL) }

// OrderToIssueSQL is OrderToIssue's read, as d runs it: $1 the order, $2
// the CAA age in microseconds (negative).
func OrderToIssueSQL(d *Dialect) string { return d.SQL(orderToIssueSQL) }

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

// pageArgs appends the page's bound and limit to a list's arguments, as
// listPage does.
func pageArgs(p store.Page, args []any) []any {
	before, limit, err := page(p)
	if err != nil {
		panic(err)
	}
	return append(args, before, limit+1)
}

// OrdersListSQL is the statement OrdersList runs for f and p, as d runs
// it, with its arguments.
func OrdersListSQL(d *Dialect, f store.OrderFilter, p store.Page) (string, []any) {
	q, args := ordersListSQL(f)
	return d.SQL(q), pageArgs(p, args)
}

// CertificatesListSQL is the statement CertificatesList runs for f and p,
// as d runs it, with its arguments.
func CertificatesListSQL(d *Dialect, f store.CertFilter, p store.Page) (string, []any) {
	q, args := certificatesListSQL(d, f)
	return d.SQL(q), pageArgs(p, args)
}

// JobIDsSQL is the statement JobIDs runs for f and p, as d runs it, with
// its arguments.
func JobIDsSQL(d *Dialect, f store.JobFilter, p store.Page) (string, []any) {
	q, args := jobIDsSQL(f)
	return d.SQL(q), pageArgs(p, args)
}

// MovableSQL is the statement RenewalMove chooses sel's certificates with,
// as d runs it, with its arguments.
func MovableSQL(d *Dialect, sel store.RenewalSelector) (string, []any) {
	q, args := movableSQL(sel)
	return d.SQL(q), args
}

// KeySiblingsSQL is the statement that finds a key's unexpired, unrevoked
// certificates, as d runs it: $1 the key's hash.
func KeySiblingsSQL(d *Dialect) string { return d.SQL(keySiblingsSQL) }

// UnhashedSQL is KeyHashBackfill's work list, as d runs it.
func UnhashedSQL(d *Dialect) string { return d.SQL(unhashedSQL) }

// BlockedKeySQL is KeyBlockedBy's read, as d runs it: $1 the key's hash.
func BlockedKeySQL(d *Dialect) string { return d.SQL(blockedKeySQL) }

// RevokedCountSQL is the statement RevokedCount runs, as d runs it: $1 the
// issuer id.
func RevokedCountSQL(d *Dialect) string { return d.SQL(revokedCountSQL) }

// IssuersSQL is the statement Issuers runs, as d runs it.
func IssuersSQL(d *Dialect) string { return d.SQL(issuersSQL) }

// SwapSQL are the issuance path's compare-and-swaps as d runs them, by
// name, with what each's $1 names: a challenge ("challenge") or an order
// ("order"). verdictSwapSQL's validated_at is the database clock's.
func SwapSQL(d *Dialect) map[string]string {
	return map[string]string{
		"ChallengeClaim":         d.SQL(challengeClaimSQL + challengeCols),
		"ChallengeClaimSigned":   d.SQL(challengeClaimSQL + challengeCols),
		"verdict: the challenge": d.SQL(fmt.Sprintf(verdictSwapSQL, "{now}")),
		"verdict: the authz":     d.SQL(verdictAuthzSQL),
		"verdict: persistUntil":  d.SQL(verdictExpiresBySQL),
		"OrderFinalizeBegin":     d.SQL(orderClaimSQL + orderCols),
		"OrderFinalizeSigned":    d.SQL(orderClaimSQL + orderCols),
		"OrderIssued: the swap":  d.SQL(orderIssuedSQL),
		"OrderFail":              d.SQL(orderFailSQL),
	}
}

// RevokeManySQL is RevokeMany's statements for an IN list of n serials, as
// d runs them: the lock and the revocation ($1 the reason, $2.. the
// serials) and the CRL entries' insert ($1.. the serials).
func RevokeManySQL(d *Dialect, n int) (lock, revoke, rows string) {
	return d.SQL(fmt.Sprintf(revokeManyLockSQL, serialList(1, n))), d.SQL(fmt.Sprintf(revokeManySQL, serialList(2, n))),
		d.SQL(fmt.Sprintf(revokeManyRowsSQL, serialList(1, n)))
}

// ActivitySQL are the statements Activity runs for the window from start
// to end, as d runs them, each followed by its arguments.
func ActivitySQL(d *Dialect, start, end time.Time) [][]any {
	qs := (&Store{d: d}).activityQueries(start, end)
	for _, q := range qs {
		q[0] = d.SQL(q[0].(string))
	}
	return qs
}
