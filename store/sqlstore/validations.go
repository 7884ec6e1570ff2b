package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// orderToIssueSQL is orderByIDSQL with whether a challenge validated one of
// the order's authorizations before {now+$2} ($2 a negative age): index
// lookups beside the order's, so the issuing worker's one read stays one
// statement when nothing is stale, as it almost always is.
//
// The challenge is looked up by a scalar subquery per authorization, not a
// join: PostgreSQL flattens a join (or an IN or EXISTS) into one whose
// plan, on tables never analyzed (autovacuum off, a fresh database), scans
// every challenge for its status, issuance after issuance. An aggregate
// subquery is not flattened and takes challenges_authz_idx.
const orderToIssueSQL = `SELECT ` + orderCols + `,
  EXISTS (SELECT 1 FROM order_authz oa WHERE oa.order_id = orders.id
    AND (SELECT MIN(c.validated_at) FROM challenges c WHERE c.authz_id = oa.authz_id AND c.status = 'valid') < {now+$2})
FROM orders WHERE id = $1`

func (s *Store) OrderToIssue(ctx context.Context, id string, caaAge time.Duration) (*store.Order, bool, error) {
	var out *store.Order
	var stale bool
	err := s.autocommit(ctx, func(t *txn) error {
		var r orderRow
		if err := t.queryRow(ctx, orderToIssueSQL, id, -caaAge.Microseconds()).Scan(append(r.dest(), &stale)...); err != nil {
			return err
		}
		var err error
		out, err = r.finish()
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("reading order %s to issue: %w", id, err)
	}
	return out, stale, nil
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
