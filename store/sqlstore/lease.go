package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/hallmark-ca/hallmark/store"
)

// TryLock takes the lease when it is free or expired, or renews it when
// holder already has it; the expiry is on the database clock, so replicas
// with skewed clocks agree.
func (s *Store) TryLock(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	var n int64
	err := s.inTx(ctx, func(t *txn) (err error) {
		n, err = t.exec(ctx, `INSERT INTO leases (name, holder, expires_at) VALUES ($1, $2, {now+$3})
ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
WHERE leases.holder = excluded.holder OR leases.expires_at <= {now}`, name, holder, ttl.Microseconds())
		return err
	})
	if err != nil {
		return false, fmt.Errorf("taking lease %s: %w", name, err)
	}
	return n == 1, nil
}

// Unlock releases the lease; store.ErrLeaseLost when holder no longer has
// it (it expired and another holder took it, or it was never taken).
func (s *Store) Unlock(ctx context.Context, name, holder string) error {
	return s.inTx(ctx, func(t *txn) error {
		n, err := t.exec(ctx, `DELETE FROM leases WHERE name = $1 AND holder = $2`, name, holder)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("releasing lease %s for %s: %w", name, holder, store.ErrLeaseLost)
		}
		return nil
	})
}

// --- audit ---

// auditInsertSQL records one audit event; $5 NULL is the database's now.
const auditInsertSQL = `INSERT INTO audit_events (actor, action, subject, detail, at, trail, request_id, client_addr, ptr_name, user_agent)
VALUES ($1, $2, $3, $4, COALESCE($5, {now}), $6, $7, $8, $9, $10)`

// auditArgs are ev's arguments of auditInsertSQL.
func (s *Store) auditArgs(ev store.AuditEvent) []any {
	var at any
	if !ev.At.IsZero() {
		at = s.d.T(ev.At)
	}
	o := ev.Origin
	return []any{ev.Actor, ev.Action, ev.Subject, ev.Detail, at, ev.Trail, o.RequestID, o.ClientAddr, o.PTR, o.UserAgent}
}

func (s *Store) audit(ctx context.Context, t *txn, ev store.AuditEvent) error {
	if _, err := t.exec(ctx, auditInsertSQL, s.auditArgs(ev)...); err != nil {
		return fmt.Errorf("recording audit event %s: %w", ev.Action, err)
	}
	return nil
}

func (s *Store) AuditRecord(ctx context.Context, ev store.AuditEvent) error {
	return s.inTx(ctx, func(t *txn) error { return s.audit(ctx, t, ev) })
}

func (s *Store) AuditList(ctx context.Context, p store.Page) ([]store.AuditEvent, string, error) {
	return s.AuditFind(ctx, store.AuditFilter{}, p)
}
