package sqlstore

import (
	"context"
	"fmt"

	"github.com/hallmark-ca/hallmark/store"
)

// RevokeRecorded records a revocation a remote backend performed.
func (s *Store) RevokeRecorded(ctx context.Context, serial string, reason int, ev store.AuditEvent) error {
	return s.inTx(ctx, func(t *txn) error {
		if _, err := s.certBySerial(ctx, t, serial); err != nil {
			return err
		}
		n, err := t.exec(ctx, `UPDATE certificates SET revoked_at = {now}, revocation_reason = $2 WHERE serial = $1 AND revoked_at IS NULL`, serial, reason)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("recording the revocation of certificate %s: it was already revoked: %w", serial, store.ErrConflict)
		}
		return s.audit(ctx, t, ev)
	})
}
