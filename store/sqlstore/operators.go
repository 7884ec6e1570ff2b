package sqlstore

import (
	"context"
	"fmt"

	"github.com/hallmark-ca/hallmark/store"
)

// The panel's operators (store.Operators).

const operatorCols = `name, role, cert_sha256, not_after, created_at, revoked_at`

func scanOperator(r Rows) (store.Operator, error) {
	var o store.Operator
	err := r.Scan(&o.Name, &o.Role, &o.CertSHA256, ts(&o.NotAfter), ts(&o.CreatedAt), tsNull(&o.RevokedAt))
	return o, err
}

func (s *Store) OperatorAdd(ctx context.Context, o store.Operator, ev store.AuditEvent) error {
	err := s.inTx(ctx, func(t *txn) error {
		if _, err := t.exec(ctx, `INSERT INTO operators (name, role, cert_sha256, not_after, created_at) VALUES ($1, $2, $3, $4, {now})`,
			o.Name, o.Role, o.CertSHA256, s.d.T(o.NotAfter)); err != nil {
			return err
		}
		return s.audit(ctx, t, ev)
	})
	if err != nil {
		return fmt.Errorf("adding operator %s: %w", o.Name, err)
	}
	return nil
}

func (s *Store) OperatorByCert(ctx context.Context, sha256Hex string) (*store.Operator, error) {
	o, err := autocommitted(ctx, s, func(t *txn) (*store.Operator, error) {
		var out *store.Operator
		err := collect(ctx, t, func(r Rows) error {
			o, err := scanOperator(r)
			out = &o
			return err
		}, `SELECT `+operatorCols+` FROM operators WHERE cert_sha256 = $1`, sha256Hex)
		if err == nil && out == nil {
			err = store.ErrNotFound
		}
		return out, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the operator of a certificate: %w", err)
	}
	return o, nil
}

func (s *Store) OperatorsList(ctx context.Context) ([]store.Operator, error) {
	out, err := autocommitted(ctx, s, func(t *txn) ([]store.Operator, error) {
		var out []store.Operator
		err := collect(ctx, t, func(r Rows) error {
			o, err := scanOperator(r)
			out = append(out, o)
			return err
		}, `SELECT `+operatorCols+` FROM operators ORDER BY name`)
		return out, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing operators: %w", err)
	}
	return out, nil
}

func (s *Store) OperatorRevoke(ctx context.Context, name string, ev store.AuditEvent) error {
	err := s.inTx(ctx, func(t *txn) error {
		n, err := t.exec(ctx, `UPDATE operators SET revoked_at = {now} WHERE name = $1 AND revoked_at IS NULL`, name)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("no operator %s who is not revoked already: %w", name, store.ErrNotFound)
		}
		return s.audit(ctx, t, ev)
	})
	if err != nil {
		return fmt.Errorf("revoking operator %s: %w", name, err)
	}
	return nil
}
