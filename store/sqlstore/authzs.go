package sqlstore

import (
	"context"
	"fmt"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// selectAuthz reads an authorization with its challenges in position order,
// one row per challenge. The LEFT JOIN keeps an authorization that has none
// as one row whose challenge columns are empty. The query goes on with the
// authorization's id (or a subquery choosing it).
const selectAuthz = `SELECT ` + authzChallengeCols + `
FROM authorizations a LEFT JOIN challenges c ON c.authz_id = a.id
WHERE a.id = `

// authzChallengeCols are a selectAuthz row's columns (scanAuthzRow).
const authzChallengeCols = `a.id, a.account_id, a.identifier_type, a.identifier_value, a.wildcard, a.status, a.expires_at, a.created_at,
  COALESCE(c.id, ''), COALESCE(c.authz_id, ''), COALESCE(c.type, ''), COALESCE(c.token, ''), COALESCE(c.status, ''),
  c.validated_at, COALESCE(c.error, ''), COALESCE(c.validation_record, '')`

// readAuthz runs a selectAuthz query; no rows is store.ErrNotFound.
func readAuthz(ctx context.Context, t *txn, q string, args ...any) (*store.Authorization, error) {
	var r authzRows
	if err := collect(ctx, t, r.each, q, args...); err != nil {
		return nil, err
	}
	return r.result()
}

// scanAuthzRow scans one row of authzChallengeCols, after lead (columns the
// query puts first): the authorization, and its challenge when it has one.
func scanAuthzRow(r Rows, lead ...any) (*store.Authorization, *store.Challenge, error) {
	var a store.Authorization
	var typ, status string
	var c challengeRow
	if err := r.Scan(append(append(lead, &a.ID, &a.AccountID, &typ, &a.Identifier.Value, &a.Wildcard, &status, ts(&a.Expires), ts(&a.CreatedAt)),
		c.dest()...)...); err != nil {
		return nil, nil, err
	}
	a.Identifier.Type = acme.IdentifierType(typ)
	a.Status = acme.Status(status)
	if c.c.ID == "" {
		return &a, nil, nil // no challenges
	}
	ch, err := c.finish()
	if err != nil {
		return nil, nil, err
	}
	return &a, ch, nil
}

// authzRows gathers a selectAuthz query's rows: the authorization from the
// first, a challenge from each.
type authzRows struct{ out *store.Authorization }

func (ar *authzRows) each(r Rows) error {
	a, ch, err := scanAuthzRow(r)
	if err != nil {
		return err
	}
	ar.add(a, ch)
	return nil
}

// add is one row of the authorization: the first row's authorization
// stands for all of them, and each row adds its challenge, if any.
func (ar *authzRows) add(a *store.Authorization, ch *store.Challenge) {
	if ar.out == nil {
		ar.out = a
	}
	if ch != nil {
		ar.out.Challenges = append(ar.out.Challenges, *ch)
	}
}

// result is the authorization read; no rows is store.ErrNotFound.
func (ar *authzRows) result() (*store.Authorization, error) {
	if ar.out == nil {
		return nil, store.ErrNotFound
	}
	return ar.out, nil
}

// authzByIDSQL reads one authorization by id.
const authzByIDSQL = selectAuthz + `$1 ORDER BY c.position`

func (s *Store) authzByID(ctx context.Context, t *txn, id string) (*store.Authorization, error) {
	a, err := readAuthz(ctx, t, authzByIDSQL, id)
	if err != nil {
		return nil, fmt.Errorf("reading authorization %s: %w", id, err)
	}
	return a, nil
}

func (s *Store) AuthzByID(ctx context.Context, id string) (*store.Authorization, error) {
	return autocommitted(ctx, s, func(t *txn) (*store.Authorization, error) { return s.authzByID(ctx, t, id) })
}

// ordersUsing locks (PostgreSQL) the orders that use authorization $1, in
// id order, each by its key (lockOrder), as the verdict's are.
const ordersUsing = `SELECT ` + lockOrder + ` FROM (SELECT order_id FROM order_authz WHERE authz_id = $1 ORDER BY 1) x`

// authzDeactivateOrdersSQL invalidates the unfinished orders using
// authorization $1; their status is no index's to answer (verdictReadySQL).
const authzDeactivateOrdersSQL = `UPDATE orders SET status = 'invalid', error = $2, updated_at = {now}
WHERE id {inlist}SELECT order_id FROM order_authz WHERE authz_id = $1{endlist} AND status || '' IN ('pending', 'ready', 'processing')`

func (s *Store) AuthzDeactivate(ctx context.Context, id string) (*store.Authorization, error) {
	var out *store.Authorization
	err := s.inTx(ctx, func(t *txn) error {
		if err := t.customPlans(ctx); err != nil {
			return err
		}
		if err := lockOrders(ctx, t, ordersUsing, id); err != nil {
			return err
		}
		n, err := t.exec(ctx, `UPDATE authorizations SET status = 'deactivated', updated_at = {now} WHERE id = $1 AND status IN ('pending', 'valid')`, id)
		if err != nil {
			return err
		}
		if n == 0 {
			a, err := s.authzByID(ctx, t, id)
			if err != nil {
				return err
			}
			return fmt.Errorf("deactivating authorization %s (status %s): %w", id, a.Status, store.ErrConflict)
		}
		pt, err := problemText(&acme.Problem{Type: acme.ProblemUnauthorized, Detail: "authorization " + id + " was deactivated"})
		if err != nil {
			return err
		}
		if _, err := t.exec(ctx, authzDeactivateOrdersSQL, id, pt); err != nil {
			return err
		}
		out, err = s.authzByID(ctx, t, id)
		return err
	})
	return out, err
}
