package store

import "context"

// RemoteRevocations records the outcome of a signer_revoke job: a relay or
// custom backend that revoked a certificate at its own CA.
type RemoteRevocations interface {
	// RevokeRecorded stamps the certificate revoked with reason and writes
	// the audit event, in one transaction; River completes the signer_revoke
	// job after the handler returns. It writes no CRL entry and queues no
	// crl_generate: the remote CA publishes its own revocation status.
	// ErrConflict if it was already revoked, ErrNotFound if there is no such
	// certificate.
	RevokeRecorded(ctx context.Context, serial string, reason int, ev AuditEvent) error
}
