package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// The job kinds. Each kind has exactly one handler, registered in the worker.
const (
	KindChallengeValidate = "challenge_validate"
	KindSignerIssue       = "signer_issue"
	KindSignerRevoke      = "signer_revoke"
	KindCRLGenerate       = "crl_generate"
	KindHousekeeping      = "housekeeping"
	KindUpstreamRenewal   = "upstream_renewal"
)

// QueueValidate carries challenge_validate jobs: any worker can validate.
const QueueValidate = "validate"

// QueueMaintenance carries housekeeping jobs: any worker can do them.
const QueueMaintenance = "maintenance"

// IssuerQueue is the queue of one issuer's crl_generate jobs (by issuer
// ID, the hex of its key identifier). A worker works the queues of the
// issuers it mounts, so a CRL job waits for a worker that holds the key
// rather than failing at every worker that does not.
//
// River takes queue names of at most 64 characters. A 20-byte key
// identifier (RFC 5280's SHA-1 method, what InitLocal makes) is 40 hex
// digits and names its queue itself; a longer one (RFC 7093's SHA-256
// method gives 32 bytes, 64 digits), which an operator's PKCS#11 issuer
// certificate may carry, is named by a digest of it instead, or no worker
// mounting that issuer could start. The digest's names start "crl_h", and
// 'h' is no hex digit: the two kinds of name never meet.
func IssuerQueue(issuerID string) string {
	// A custom backend's ID ("custom:<name>") holds a ':', which River
	// refuses in a queue name: it is named by its digest too.
	if q := "crl_" + issuerID; len(q) <= maxQueueName && isHex(issuerID) {
		return q
	}
	sum := sha256.Sum256([]byte(issuerID))
	return "crl_h" + hex.EncodeToString(sum[:])[:maxQueueName-len("crl_h")]
}

// maxQueueName is River's limit on a queue name's length.
const maxQueueName = 64

// ProfileQueue is the queue of signing work for one profile. A worker
// subscribes only to the queues of the profiles whose backends it mounts, so a
// job for a profile it does not mount is left for a worker that does.
func ProfileQueue(profile string) string { return "profile_" + profile }

// outstanding are the states in which a job still counts as "the one job for
// this subject": a second insert while one is in them is skipped. Completed
// jobs are excluded so a subject can be worked again after a terminal verdict
// only through an explicit new claim.
var outstanding = []rivertype.JobState{
	rivertype.JobStateAvailable,
	rivertype.JobStatePending,
	rivertype.JobStateRetryable,
	rivertype.JobStateRunning,
	rivertype.JobStateScheduled,
}

// ChallengeValidateArgs asks a worker to validate one challenge.
type ChallengeValidateArgs struct {
	ChallengeID string `json:"challenge_id" river:"unique"`
}

func (ChallengeValidateArgs) Kind() string { return KindChallengeValidate }

func (ChallengeValidateArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueValidate, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: outstanding}}
}

// SubjectOf names the challenge, so a broken handler abandons it.
func (a ChallengeValidateArgs) SubjectOf() Subject {
	return Subject{Kind: KindChallengeValidate, ID: a.ChallengeID}
}

// SignerIssueArgs asks a worker that mounts Profile to sign an order.
type SignerIssueArgs struct {
	OrderID string `json:"order_id" river:"unique"`
	Profile string `json:"profile"`
}

func (SignerIssueArgs) Kind() string { return KindSignerIssue }

func (a SignerIssueArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: ProfileQueue(a.Profile), UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: outstanding}}
}

// SubjectOf names the order, so a broken handler abandons it.
func (a SignerIssueArgs) SubjectOf() Subject { return Subject{Kind: KindSignerIssue, ID: a.OrderID} }

// SignerRevokeArgs asks a relay or custom backend to revoke a certificate.
type SignerRevokeArgs struct {
	Serial  string `json:"serial" river:"unique"`
	Profile string `json:"profile"`
	Reason  int    `json:"reason"`
}

func (SignerRevokeArgs) Kind() string { return KindSignerRevoke }

// InsertOpts makes the job unique by serial while it is outstanding. A
// client that asks again while its certificate's job is queued, waiting to
// retry or running is given that job (Inserter.InsertTx returns its id) and
// waits on its answer instead of piling a second job on the backend: the
// backend has not answered yet, so asking it twice at once tells nothing
// new, and a backend that is down would be hammered by every client retry.
// A finished job is not outstanding, so a request after a refusal queues a
// new job and the backend is asked again. The reason is not part of the
// key: a request that joins a job gets that job's reason.
func (a SignerRevokeArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: ProfileQueue(a.Profile), UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: outstanding}}
}

// SignerRevokeOutput is what a signer_revoke job records as its output
// (RecordOutput) when the backend refused: the request waiting on that job
// reads it (store.RevokeProgress) and passes the refusal on. A job that
// revoked records none (the certificate row says so), nor does one that
// could not ask (it is retried).
type SignerRevokeOutput struct {
	Refused *acme.Problem `json:"refused,omitempty"`
}

// CRLGenerateArgs asks a worker to sign the next CRL of one issuer's shard
// (0, the unsharded URL's, for a job queued before sharding). It has
// no uniqueness: River requires a unique job's running state to block
// inserts, and a revocation that lands while a CRL is being signed must still
// queue the next one. The handler coalesces instead: it skips when the
// shard's newest CRL already covers every revocation.
type CRLGenerateArgs struct {
	IssuerID string `json:"issuer_id"`
	Shard    int    `json:"shard,omitempty"`
}

func (CRLGenerateArgs) Kind() string { return KindCRLGenerate }

func (a CRLGenerateArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: IssuerQueue(a.IssuerID)}
}

// HousekeepingArgs runs the periodic sweeps: nonce GC, expiring pending
// objects, recovering stranded claims.
type HousekeepingArgs struct{}

func (HousekeepingArgs) Kind() string { return KindHousekeeping }

func (HousekeepingArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMaintenance}
}

// Tx is a store's open transaction, handed through to the queue so a job is
// inserted atomically with the row change that needs it: pgx.Tx on
// PostgreSQL, *sql.Tx on SQLite.
type Tx = any

// Inserter inserts a job inside a store's transaction. inserted is false when
// River's uniqueness skipped it because the subject already has a job; id is
// then that job's, so a caller can wait on the job that will do the work.
type Inserter interface {
	InsertTx(ctx context.Context, tx Tx, args river.JobArgs) (id int64, inserted bool, err error)
}

// Subject is the record a job works on, as abandon and recover see it.
type Subject struct {
	Kind string // a job kind: KindChallengeValidate or KindSignerIssue
	ID   string // the challenge or order id
}

// SubjectArgs is implemented by the args of jobs that work on a subject a
// client is polling (a challenge, an order): when their handler breaks, the
// subject is abandoned with a serverInternal problem instead of left
// processing forever.
type SubjectArgs interface {
	river.JobArgs
	SubjectOf() Subject
}

// UpstreamRenewalArgs asks a worker that mounts a relay backend to fetch
// its upstream's renewal windows (RFC 9773) for the relay's live
// certificates that are due, a bounded number per job. It goes on the
// queue of a profile that relays to the backend (Profile), so only a
// worker holding the relay's upstream account takes it; unique while
// outstanding, so the copies every such worker schedules do not pile up
// behind a slow upstream.
type UpstreamRenewalArgs struct {
	IssuerID string `json:"issuer_id" river:"unique"`
	Profile  string `json:"profile" river:"unique"`
}

func (UpstreamRenewalArgs) Kind() string { return KindUpstreamRenewal }

func (a UpstreamRenewalArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: ProfileQueue(a.Profile), UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: outstanding}}
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil && s != ""
}
