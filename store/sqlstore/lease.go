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

func (s *Store) audit(ctx context.Context, t *txn, ev store.AuditEvent) error {
	var at any
	if !ev.At.IsZero() {
		at = s.d.T(ev.At)
	}
	_, err := t.exec(ctx, `INSERT INTO audit_events (actor, action, subject, detail, at) VALUES ($1, $2, $3, $4, COALESCE($5, {now}))`,
		ev.Actor, ev.Action, ev.Subject, ev.Detail, at)
	if err != nil {
		return fmt.Errorf("recording audit event %s: %w", ev.Action, err)
	}
	return nil
}

func (s *Store) AuditRecord(ctx context.Context, ev store.AuditEvent) error {
	return s.inTx(ctx, func(t *txn) error { return s.audit(ctx, t, ev) })
}

func (s *Store) AuditList(ctx context.Context, p store.Page) ([]store.AuditEvent, string, error) {
	out, next, err := listPage(ctx, s, p, func(r Rows, seq *int64) (ev store.AuditEvent, err error) {
		err = r.Scan(&ev.ID, &ev.Actor, &ev.Action, &ev.Subject, &ev.Detail, ts(&ev.At))
		*seq = ev.ID
		return ev, err
	}, nil, `SELECT id, actor, action, subject, detail, at FROM audit_events WHERE id < $1 ORDER BY id DESC LIMIT $2`)
	if err != nil {
		return nil, "", fmt.Errorf("listing audit events: %w", err)
	}
	return out, next, nil
}
