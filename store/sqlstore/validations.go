package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

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
