package store

import (
	"context"

	"github.com/hallmark-ca/hallmark/jobs"
)

// RemoteRevocations records the outcome of a signer_revoke job: a relay or
// custom backend that revoked a certificate at its own CA.
type RemoteRevocations interface {
	// RevokeRecorded stamps the certificate revoked with reason, writes the
	// audit event and calls done, in one transaction. It writes no CRL
	// entry and queues no crl_generate: the remote CA publishes its own
	// revocation status. ErrConflict if it was already revoked (done is
	// then not called), ErrNotFound if there is no such certificate.
	RevokeRecorded(ctx context.Context, serial string, reason int, ev AuditEvent, done jobs.Done) error
}
