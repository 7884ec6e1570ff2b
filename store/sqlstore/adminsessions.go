package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/hallmark-ca/hallmark/store"
)

// The admin panel's sessions (store.AdminSessions). A lookup is one read
// by primary key; the panel is low traffic, so expired rows are swept by
// the next sign-in rather than by a job of their own.

func (s *Store) AdminSessionCreate(ctx context.Context, id, operator string, ttl time.Duration, ev store.AuditEvent) error {
	err := s.inTx(ctx, func(t *txn) error {
		if _, err := t.exec(ctx, `DELETE FROM admin_sessions WHERE expires_at <= {now}`); err != nil {
			return fmt.Errorf("removing expired sessions: %w", err)
		}
		_, err := t.exec(ctx, `INSERT INTO admin_sessions (id, operator, created_at, expires_at) VALUES ($1, $2, {now}, {now+$3})`,
			id, operator, ttl.Microseconds())
		if err != nil {
			return err
		}
		return s.audit(ctx, t, ev)
	})
	if err != nil {
		return fmt.Errorf("recording the admin session of %s: %w", operator, err)
	}
	return nil
}

func (s *Store) AdminSessionOperator(ctx context.Context, id string) (string, error) {
	var operator string
	err := s.autocommit(ctx, func(t *txn) error {
		return t.queryRow(ctx, `SELECT operator FROM admin_sessions WHERE id = $1 AND expires_at > {now}`, id).Scan(&operator)
	})
	if err != nil {
		return "", fmt.Errorf("reading an admin session: %w", err)
	}
	return operator, nil
}

func (s *Store) AdminSessionEnd(ctx context.Context, id string, ev store.AuditEvent) error {
	err := s.inTx(ctx, func(t *txn) error {
		if _, err := t.exec(ctx, `DELETE FROM admin_sessions WHERE id = $1`, id); err != nil {
			return err
		}
		return s.audit(ctx, t, ev)
	})
	if err != nil {
		return fmt.Errorf("ending an admin session: %w", err)
	}
	return nil
}
