package store

import (
	"context"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// RemoteRevocations records and reads the outcome of a signer_revoke job: a
// relay or custom backend that revoked a certificate at its own CA, or
// refused to.
type RemoteRevocations interface {
	// RevokeRecorded stamps the certificate revoked with reason and writes
	// the audit event, in one transaction; River completes the signer_revoke
	// job after the handler returns. It writes no CRL entry and queues no
	// crl_generate: the remote CA publishes its own revocation status.
	// With reason keyCompromise it blocks the key and revokes the key's
	// other certificates, as Revoke does.
	// ErrConflict if it was already revoked, ErrNotFound if there is no such
	// certificate.
	RevokeRecorded(ctx context.Context, serial string, reason int, ev AuditEvent) error
	// RevokeProgress is one poll of a request waiting on signer_revoke job
	// jobID (RevokeQueue's) for certificate serial: one statement, two
	// primary-key reads. ErrNotFound if there is no such certificate; a job
	// River has deleted reads as one that has not answered.
	RevokeProgress(ctx context.Context, serial string, jobID int64) (RevokeProgress, error)
}

// RevokeProgress is where a queued relay/custom revocation stands.
type RevokeProgress struct {
	// Revoked is true once the certificate is revoked, by this job or any
	// other way.
	Revoked bool
	// Refused is the backend's refusal, as the job recorded it when it
	// completed (jobs.SignerRevokeOutput); nil until then, and for a job
	// that revoked.
	Refused *acme.Problem
}
