package worker

import (
	"context"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// stores is the store as each job's handler sees it, the part it uses;
// New fills every part from its one store.Store.
type stores struct {
	validate  validateStore
	issue     issueStore
	crls      crlStore
	revoke    revokeStore
	housekeep housekeepStore
	upstream  upstreamStore
	live      jobs.Liveness
	// perspectives is multi-perspective validation's (perspective.go).
	perspectives perspectiveStore
	ping         interface {
		Ping(ctx context.Context) error
	}
}

// validateStore is challenge_validate's (validate.go).
type validateStore interface {
	ChallengeWithAuthz(ctx context.Context, challengeID string) (*store.ChallengeAuthz, error)
	ChallengeVerdict(ctx context.Context, v store.Verdict) error
	// AccountPriorThumbprints is read for dns-persist-01 only.
	AccountPriorThumbprints(ctx context.Context, id string) ([]string, error)
}

// issueStore is signer_issue's (issue.go, caa.go).
type issueStore interface {
	OrderToIssue(ctx context.Context, id string, caaAge time.Duration) (*store.ToIssue, error)
	OrderFailTrailed(ctx context.Context, orderID string, p acme.Problem, ev store.AuditEvent) error
	OrderIssued(ctx context.Context, in store.Issued) error
	UndeliveredRecord(ctx context.Context, c store.Certificate, reason int, ev store.AuditEvent) error
	StaleValidations(ctx context.Context, orderID string, age time.Duration) ([]store.StaleValidation, error)
}

// leaseStore is a named lease (one holder at a time across workers) on
// the database's clock.
type leaseStore interface {
	TryLock(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
	Unlock(ctx context.Context, name, holder string) error
	Now(ctx context.Context) (time.Time, error)
}

// crlStore is crl_generate's (crl.go).
type crlStore interface {
	leaseStore
	CRLEntries(ctx context.Context, issuerID string, shard int, asOf time.Time) ([]store.Revocation, error)
	CRLShardLatest(ctx context.Context, issuerID string, shard int) (*store.CRL, error)
	CRLShards(ctx context.Context, issuerID string) ([]*store.CRL, error)
	CRLNextNumber(ctx context.Context, issuerID string, shard int) (int64, error)
	CRLStore(ctx context.Context, c store.CRL) error
}

// revokeStore is signer_revoke's (revoke.go).
type revokeStore interface {
	CertificateBySerial(ctx context.Context, serial string) (*store.Certificate, error)
	Revoke(ctx context.Context, serial string, reason int, ev store.AuditEvent) (*store.Certificate, error)
	RevokeRecorded(ctx context.Context, serial string, reason int, ev store.AuditEvent) error
	AuditRecord(ctx context.Context, ev store.AuditEvent) error
}

// housekeepStore is housekeeping's (the trail's pruning and the expiry
// notifications too), with the stranded subjects it and the job runner
// recover (jobs.Recover).
type housekeepStore interface {
	leaseStore
	jobs.Subjects
	NonceGC(ctx context.Context) (int64, error)
	ExpirePending(ctx context.Context) (int64, error)
	KeySweep(ctx context.Context, since time.Time, margin time.Duration) (store.KeyBlockResult, error)
	KeyHashBackfill(ctx context.Context, limit int) (hashed int, revoked store.KeyBlockResult, err error)
	AuditPrune(ctx context.Context, before time.Time, limit int) (int64, error)
	NotifyExpiring(ctx context.Context, days, limit int) (int, error)
	HeartbeatGC(ctx context.Context, before time.Time) (int64, error)
}

// upstreamStore is upstream_renewal's (upstream.go).
type upstreamStore interface {
	Now(ctx context.Context) (time.Time, error)
	UpstreamDue(ctx context.Context, issuerID string, limit int) ([]store.UpstreamDue, error)
	UpstreamRecord(ctx context.Context, w store.UpstreamWindow) error
}
