package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/jobs/notify"
	"github.com/hallmark-ca/hallmark/store"
)

// RevokeRecorded records a revocation a remote backend performed.
func (s *Store) RevokeRecorded(ctx context.Context, serial string, reason int, ev store.AuditEvent) error {
	return s.inTx(ctx, func(t *txn) error {
		c, err := s.certBySerial(ctx, t, serial)
		if err != nil {
			return err
		}
		n, err := t.exec(ctx, `UPDATE certificates SET revoked_at = {now}, revocation_reason = $2 WHERE serial = $1 AND revoked_at IS NULL`, serial, reason)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("recording the revocation of certificate %s: it was already revoked: %w", serial, store.ErrConflict)
		}
		if err := s.audit(ctx, t, ev); err != nil {
			return err
		}
		if err := s.notify(ctx, t, certNotice(notify.CertificateRevoked, c, ev)); err != nil {
			return err
		}
		if reason == store.ReasonKeyCompromise {
			return s.compromised(ctx, t, []*store.Certificate{c}, ev)
		}
		return nil
	})
}

// revokeProgressSQL reads whether certificate $1 is revoked and the output
// its signer_revoke job $2 recorded (jobs.RecordOutput: River writes it into
// the job's metadata as it completes the job), or an empty string for
// none. Both are primary-key lookups, so a waiter polling it costs what
// polling the certificate alone did, less the DER.
const revokeProgressSQL = `SELECT CASE WHEN c.revoked_at IS NULL THEN 0 ELSE 1 END,
  COALESCE((SELECT {json:j.metadata:output} FROM river_job j WHERE j.id = $2), '')
FROM certificates c WHERE c.serial = $1`

func (s *Store) RevokeProgress(ctx context.Context, serial string, jobID int64) (store.RevokeProgress, error) {
	var revoked int
	var output string
	err := s.autocommit(ctx, func(t *txn) error {
		return t.queryRow(ctx, revokeProgressSQL, serial, jobID).Scan(&revoked, &output)
	})
	if err != nil {
		return store.RevokeProgress{}, fmt.Errorf("reading the revocation progress of certificate %s (job %d): %w", serial, jobID, err)
	}
	p := store.RevokeProgress{Revoked: revoked == 1}
	if output == "" {
		return p, nil
	}
	var out jobs.SignerRevokeOutput
	if err := json.Unmarshal([]byte(output), &out); err != nil {
		return store.RevokeProgress{}, fmt.Errorf("decoding the output of signer_revoke job %d: %w", jobID, err)
	}
	p.Refused = out.Refused
	return p, nil
}
