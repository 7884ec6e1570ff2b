package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// orderToIssueSQL is orderByIDSQL with whether a challenge validated one of
// the order's authorizations before {now+$2} ($2 a negative age), the
// status of the order's account, and the first of its authorizations that
// is not valid (” for none), and when the key of its CSR was blocked
// (NULL when it is not: blocked_keys by its primary key, from the hash the
// finalize stored): index lookups beside the order's, so the
// issuing worker's one read stays one statement when nothing is stale, as
// it almost always is.
//
// The challenge is looked up by a scalar subquery per authorization, not a
// join: PostgreSQL flattens a join (or an IN or EXISTS) into one whose
// plan, on tables never analyzed (autovacuum off, a fresh database), scans
// every challenge for its status, issuance after issuance. An aggregate
// subquery is not flattened and takes challenges_authz_idx. Its status
// test is a FILTER so that PostgreSQL does not turn MIN into a walk of
// challenges_validated_idx (the panel's index) in time order. The
// authorizations' statuses are read the same way (orderLapsedAuthzSQL).
const orderToIssueSQL = `SELECT ` + orderCols + `,
  EXISTS (SELECT 1 FROM order_authz oa WHERE oa.order_id = orders.id
    AND (SELECT MIN(c.validated_at) FILTER (WHERE c.status = 'valid') FROM challenges c WHERE c.authz_id = oa.authz_id) < {now+$2}),
  COALESCE(` + orderAccountStatusSQL + `, ''), COALESCE(` + orderLapsedAuthzSQL + `, ''),
  ` + orderKeyBlockedSQL + `, COALESCE(` + orderUncorroboratedSQL + `, '')
FROM orders WHERE id = $1`

// orderUncorroboratedSQL is the first authorization of the orders row at
// hand that a challenge validated and network perspectives did not
// corroborate, NULL for none (one born valid had no network check).
// Each authorization and its challenges are read by key, in scalar
// subqueries (a join was planned as a scan of every authorization while
// the table was small, and kept).
const orderUncorroboratedSQL = `(SELECT MIN(oa.authz_id) FROM order_authz oa WHERE oa.order_id = orders.id
  AND (SELECT NOT a.corroborated FROM authorizations a WHERE a.id = oa.authz_id)
  AND (SELECT MIN(c.position) FROM challenges c WHERE c.authz_id = oa.authz_id) IS NOT NULL)`

// orderKeyBlockedSQL is when the key of the CSR of the orders row at hand
// was blocked (blocked_keys, by its primary key), NULL when it was not.
const orderKeyBlockedSQL = `(SELECT b.blocked_at FROM blocked_keys b WHERE b.spki_sha256 = orders.csr_spki_sha256)`

// orderAccountStatusSQL is the status of the account of the orders row at
// hand, by its key.
const orderAccountStatusSQL = `(SELECT ac.status FROM accounts ac WHERE ac.id = orders.account_id)`

// orderLapsedAuthzSQL is the first (by ID) authorization of the orders row
// at hand that is not valid, or has expired (a dns-persist-01 record's
// persistUntil can bring an expiry before the order's), NULL for none: from
// order_authz by the order's key, each authorization by its own key.
const orderLapsedAuthzSQL = `(SELECT MIN(oa.authz_id) FROM order_authz oa WHERE oa.order_id = orders.id
    AND (SELECT CASE WHEN a.expires_at > {now} THEN a.status ELSE 'expired' END FROM authorizations a WHERE a.id = oa.authz_id) <> 'valid')`

// orderAuthorizedSQL holds for an orders row whose account and
// authorizations are all still valid and whose CSR's key is not blocked:
// OrderIssued's compare-and-swap requires it, as OrderToIssue reads it
// (issueLapsed, Blocked), so a certificate signed while its key was
// reported compromised (a slow HSM, a relay's upstream) is not delivered.
// Scalar subqueries all, which PostgreSQL runs by key from the one row,
// never flattened into a join a plan without statistics could scan.
const orderAuthorizedSQL = orderAccountStatusSQL + ` = 'valid' AND ` + orderLapsedAuthzSQL + ` IS NULL AND ` + orderKeyBlockedSQL + ` IS NULL`

func (s *Store) OrderToIssue(ctx context.Context, id string, caaAge time.Duration) (*store.ToIssue, error) {
	var out *store.ToIssue
	err := s.autocommit(ctx, func(t *txn) error {
		var r orderRow
		var stale bool
		var acct, lapsed, uncorroborated string
		var blocked *time.Time
		if err := t.queryRow(ctx, orderToIssueSQL, id, -caaAge.Microseconds()).Scan(append(r.dest(), &stale, &acct, &lapsed, tsNull(&blocked), &uncorroborated)...); err != nil {
			return err
		}
		o, err := r.finish()
		if err != nil {
			return err
		}
		out = &store.ToIssue{Order: o, Stale: stale, Lapsed: issueLapsed(acct, lapsed), Uncorroborated: uncorroborated}
		if blocked != nil {
			out.Blocked = &acme.Problem{Type: acme.ProblemBadPublicKey, Detail: store.BlockedKey{BlockedAt: *blocked}.Problem("the CSR's public key") +
				", then finalize a new order with a CSR for it; this order was not issued"}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading order %s to issue: %w", id, err)
	}
	return out, nil
}

// issueLapsed is the problem of an order whose account has status acct and
// whose first authorization that is not valid is authzID ("" for none):
// nil when both are valid.
func issueLapsed(acct, authzID string) *acme.Problem {
	switch {
	case acct != string(acme.StatusValid):
		return &acme.Problem{Type: acme.ProblemUnauthorized, Detail: fmt.Sprintf(
			"the account is %s, so the certificate was not issued (RFC 8555 §7.3.6); a valid account must order it again", acct)}
	case authzID != "":
		return &acme.Problem{Type: acme.ProblemUnauthorized, Detail: fmt.Sprintf(
			"authorization %s is no longer valid, so the certificate was not issued; create a new order", authzID)}
	}
	return nil
}

// StaleValidations runs only when OrderToIssue found something stale, a
// few times in 7 hours of an order's life, so its plain join stays: on a
// table never analyzed it may scan the challenges once, off the hot path.
func (s *Store) StaleValidations(ctx context.Context, orderID string, age time.Duration) ([]store.StaleValidation, error) {
	var out []store.StaleValidation
	err := s.autocommit(ctx, func(t *txn) error {
		out = nil
		return collect(ctx, t, func(r Rows) error {
			var v store.StaleValidation
			var typ, method string
			if err := r.Scan(&typ, &v.Identifier.Value, &v.Wildcard, &method, ts(&v.Validated)); err != nil {
				return err
			}
			v.Identifier.Type, v.Method = acme.IdentifierType(typ), acme.ChallengeType(method)
			out = append(out, v)
			return nil
		}, `SELECT a.identifier_type, a.identifier_value, a.wildcard, c.type, c.validated_at
FROM order_authz oa
JOIN authorizations a ON a.id = oa.authz_id
JOIN challenges c ON c.authz_id = a.id
WHERE oa.order_id = $1 AND c.status = 'valid' AND c.validated_at < {now+$2}
ORDER BY oa.position`, orderID, -age.Microseconds())
	})
	if err != nil {
		return nil, fmt.Errorf("reading the stale validations of order %s: %w", orderID, err)
	}
	return out, nil
}
