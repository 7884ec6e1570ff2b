package store

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// Sentinel errors, mapped identically by both dialects (the contract suite
// asserts it).
var (
	ErrNotFound  = errors.New("store: not found")
	ErrConflict  = errors.New("store: conflict")   // a unique key or a compare-and-swap lost
	ErrLeaseLost = errors.New("store: lease lost") // the caller no longer holds the lease
	ErrTooNew    = errors.New("store: database schema is newer than this binary")
	// ErrBadCursor is a Page.After this store did not hand out: the
	// caller's mistake (a client or an operator editing a URL), not the
	// store's.
	ErrBadCursor = errors.New("store: not a page cursor this store returned")
	// ErrNotClaimed is OrderCreate with a nonce or a Clock that committed
	// nothing: a check did not hold (SignedUse, NewOrder.Clock). The
	// caller's read, which consumes the nonce, tells which.
	ErrNotClaimed = errors.New("store: the claim's checks did not hold; nothing was written")
	// ErrAuthzUnusable is OrderCreate refusing an authorization the order
	// was to reuse that stopped being valid (deactivated, expired) after
	// the caller chose it: the caller drafts the order again.
	ErrAuthzUnusable = errors.New("store: an authorization to reuse is no longer valid")
	// ErrUnauthorized is OrderIssued refusing to record a certificate for
	// an order still processing whose account or one of whose
	// authorizations stopped being valid, or whose CSR's key was blocked,
	// while it was signed: the caller fails the order (OrderFail, with
	// what OrderToIssue reads), and the certificate is not delivered.
	ErrUnauthorized = errors.New("store: the order's account or an authorization of it is no longer valid, or its key was reported compromised")
	// ErrUnavailable is the database failing for a while rather than for
	// the request: unreachable, restarting or shutting down, out of
	// connections, or (SQLite) locked beyond its busy timeout or failing
	// I/O. The dialects decide which errors are such (sqlstore.Conn's
	// Classify). The call did not complete, or a commit's outcome is
	// unknown; the caller tries again later (the frontend answers 503
	// with Retry-After, a job is retried).
	ErrUnavailable = errors.New("store: the database is unavailable")
)

// ToIssue is what the issuing worker reads of an order (OrderToIssue).
type ToIssue struct {
	Order *Order
	// Stale: a challenge validated one of the order's authorizations
	// more than the age asked ago on the database clock
	// (StaleValidations says which).
	Stale bool
	// Lapsed, when set, is why the order, though processing, must not be
	// issued: its account is no longer valid (deactivated, RFC 8555
	// §7.3.6), or one of its authorizations is not (§7.5.2). Its type is
	// unauthorized; the worker fails the order with it before signing.
	Lapsed *acme.Problem
	// Blocked, when set, is the key of the order's CSR blocked since the
	// finalize stored it (BlockedKeys; CA/B Forum BR §6.1.1.3): its type
	// is badPublicKey; the worker fails the order with it before signing.
	Blocked *acme.Problem
	// Uncorroborated is the first of the order's authorizations network
	// perspectives did not corroborate ("" for none): a profile requiring
	// corroboration fails the order with it before signing.
	Uncorroborated string
}

// ClockSlack is how far an estimate of the database's clock a newOrder
// drafted without a read may be off (NewOrder.Clock): its order and authorizations then
// expire at most this much earlier or later than the ordinary path would
// have made them.
const ClockSlack = 2 * time.Second

// Storable reports whether s can be a text column's value on every store:
// valid UTF-8 with no NUL. PostgreSQL refuses anything else as a parameter,
// failing the statement (and a batch with it), so text that comes from the
// network and would only look a row up is checked with this first: no row
// can hold it.
func Storable(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// NewOrder is what OrderCreate writes. Authzs with an ID are existing
// authorizations being reused; those without are created with their
// challenges. The order starts ready when every authorization is valid.
type NewOrder struct {
	AccountID   string
	Identifiers []acme.Identifier
	Profile     string
	NotBefore   *time.Time
	NotAfter    *time.Time
	Expires     time.Time
	Authzs      []*Authorization
	// Methods are the challenge types the order's profile offers: the
	// authorizations OrderCreate with a Clock makes sure none could be
	// reused are those AuthzsReusable finds for them.
	Methods []acme.ChallengeType
	// Corroborated: the order's profile requires perspectives to have
	// corroborated each authorization it reuses (AuthzKey.Corroborated).
	Corroborated bool
	Replaces     string
	// ReplacesSerial, when set, is the serial of the certificate Replaces
	// names (RFC 9773 §5): OrderCreate marks it replaced by the new order in
	// the same transaction, and fails with ErrNotFound if the account has no
	// such certificate or ErrConflict if an order that is not invalid
	// already replaces it.
	ReplacesSerial string
	// Pause, when on, refuses the order with ErrPaused, writing nothing,
	// if its account is paused for one of its identifiers, checked in its
	// transaction.
	Pause PauseRule
	// Limits are the rate limits the order's own transaction reserves a
	// unit of (ratelimit.go): zero is none.
	Limits OrderLimits
	// Clock, when set, says the order was drafted without a read: its
	// times from this estimate of the database's clock, and no
	// authorization looked for to reuse. OrderCreate checks both (the
	// clock within ClockSlack, none reusable) and writes only an order
	// whose authorizations are all new and that replaces nothing.
	Clock time.Time
}

// Verdict is a validator's answer for one challenge. Status is valid or invalid.
type Verdict struct {
	ChallengeID      string
	Status           acme.Status
	Error            *acme.Problem
	ValidationRecord []byte
	// Trail, when set, is recorded in the verdict's transaction (a failed
	// validation's trail event, ActionValidationFailed).
	Trail *AuditEvent
	// ExpiresBy, when set on a valid verdict, is the latest the
	// authorization may expire: the validating record's persistUntil
	// (draft-ietf-acme-dns-persist-02 §4.1). A later expiry is brought forward.
	ExpiresBy time.Time
	// Corroborated, on a valid verdict, marks the authorization as
	// corroborated by network perspectives (BR §3.2.2.9).
	Corroborated bool
}

// Issued is what the signer hands back for an order.
type Issued struct {
	OrderID     string
	Certificate Certificate
	// Trail, when set, is recorded in the transaction that stores the
	// certificate (ActionCertificateIssued).
	Trail *AuditEvent
}

// Page asks for one page of a list, newest first. After is the cursor the
// previous page returned ("" for the first).
type Page struct {
	After string
	Limit int
}

// Rows reads up to limit rows (all of them when limit is 0) from a listing
// that returns one page at a time, following its cursor: a store returns
// at most one page (1000 rows) per call.
func Rows[T any](limit int, list func(Page) ([]T, string, error)) ([]T, error) {
	out := []T{}
	p := Page{}
	for limit == 0 || len(out) < limit {
		if limit > 0 {
			p.Limit = limit - len(out)
		}
		rows, next, err := list(p)
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
		if next == "" || len(rows) == 0 {
			break
		}
		p.After = next
	}
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// OrderFilter narrows OrdersList; empty fields match everything.
type OrderFilter struct {
	AccountID  string
	Identifier string
	Status     acme.Status
}

// CertFilter narrows CertificatesList; empty fields match everything.
type CertFilter struct {
	AccountID      string
	Name           string
	ExpiringBefore *time.Time
	Revoked        *bool
}

// AuthzKey is what an authorization is for: an identifier (without "*.")
// and whether it is a wildcard's.
type AuthzKey struct {
	Identifier acme.Identifier
	Wildcard   bool
	// Corroborated: only an authorization network perspectives
	// corroborated counts (a profile with perspectives = true).
	Corroborated bool
}

// Store is every operation on Hallmark's records.
type Store interface {
	// store/ari.go, store/eab.go: ARI (RFC 9773), external account binding
	// and newAuthz (RFC 8555 §7.3.4, §7.4.1).
	Renewals
	ExternalAccounts
	PreAuthorizations
	ChallengeReads // store/challenge_authz.go: a challenge with its authorization, one read

	RateLimits // store/ratelimit.go: counts for the frontend's rate limits
	RemoteRevocations
	UpstreamOrders // store/upstreamorders.go: the relay backends' journal of upstream orders
	RelayTokens    // store/relaytokens.go: the relay backends' http-01 answers, served by the frontend
	BlockedKeys    // store/blockedkeys.go: keys reported compromised, never certified again
	AdminViews     // store/adminviews.go: the admin panel's summaries
	AdminSessions  // store/adminsessions.go: the admin panel's sign-ins
	Trail          // store/trail.go: the issuance trail in the audit log
	Operators      // store/operators.go: the panel's operators and their roles
	Audited        // store/auditchain.go: the audit log's chains, operators' actions audited in their transaction
	Notices        // store/notify.go: certificate_expiring, found by housekeeping
	Pauses         // store/pauses.go: accounts paused for an identifier they keep failing
	Perspectives   // store/perspectives.go: the network perspectives' answers for a challenge
	IssuerRecords  // store/issuerrecords.go: managed issuers, their chains and profiles
	// Now is the database's clock.
	Now(ctx context.Context) (time.Time, error)
	Ping(ctx context.Context) error
	Close() error

	Nonces // store/nonces.go: the consumed-nonce set, and each request's account with it

	// AccountCreate inserts an account; ErrConflict (and the existing account)
	// when one with the same Thumbprint exists.
	AccountCreate(ctx context.Context, a *Account) (*Account, error)
	AccountByID(ctx context.Context, id string) (*Account, error)
	AccountByThumbprint(ctx context.Context, thumbprint string) (*Account, error)
	AccountUpdate(ctx context.Context, id string, contact []string) (*Account, error)
	// AccountDeactivate sets the account deactivated and deactivates its
	// pending and valid authorizations (RFC 8555 §7.3.6).
	AccountDeactivate(ctx context.Context, id string) (*Account, error)
	// AccountKeyChange swaps the key iff the current thumbprint is oldThumb;
	// ErrConflict if newThumb belongs to another account or the swap lost.
	AccountKeyChange(ctx context.Context, id, oldThumb string, newJWK []byte, newThumb string) (*Account, error)
	// AccountPriorThumbprints are the thumbprints of the keys the account
	// has replaced (migration 0022), the most recently replaced first: a
	// dns-persist-01 record hashed with one still validates.
	AccountPriorThumbprints(ctx context.Context, id string) ([]string, error)
	AccountsList(ctx context.Context, p Page) ([]*Account, string, error)

	// OrderCreate writes an order and its new authorizations and challenges.
	// An authorization it reuses must still be the account's, valid and
	// unexpired, or it writes nothing and the error is ErrAuthzUnusable.
	// With o.Limits set it takes its units of them in the same
	// transaction, or writes nothing and the error is a *RateLimited.
	// With a nonce in u it also consumes it and checks the account (as
	// ChallengeClaim does), and with o.Clock set it checks what a draft
	// made without a read could not know; when any check fails it commits
	// nothing and the error is ErrNotClaimed.
	OrderCreate(ctx context.Context, u SignedUse, o NewOrder) (*Order, error)
	OrderByID(ctx context.Context, id string) (*Order, error)
	// OrderToIssue is OrderByID for the issuing worker, in the same one
	// statement: the order, whether a challenge validated one of its
	// authorizations more than caaAge ago on the database clock (then
	// StaleValidations says which), and whether its account and
	// authorizations still authorize it (ToIssue.Lapsed).
	OrderToIssue(ctx context.Context, id string, caaAge time.Duration) (*ToIssue, error)
	// StaleValidations are the order's authorizations whose challenge
	// validated them more than age ago on the database clock, in the
	// order's position order: the issuing worker checks their CAA again
	// (CA/B Forum BR §3.2.2.8 allows 8 hours between the check and
	// issuance). An authorization born valid (a pre-validated binding) has
	// no challenge and is not among them.
	StaleValidations(ctx context.Context, orderID string, age time.Duration) ([]StaleValidation, error)
	// OrdersByAccount lists order IDs of an account for its "orders" URL.
	OrdersByAccount(ctx context.Context, accountID string, p Page) ([]string, string, error)
	OrdersList(ctx context.Context, f OrderFilter, p Page) ([]*Order, string, error)

	AuthzByID(ctx context.Context, id string) (*Authorization, error)
	// AuthzsReusable finds, for each key, the valid, unexpired
	// authorization of the account for it that lives longest, if it lives
	// past minExpiry, in one read: found[i] is keys[i]'s, nil when there
	// is none. (Choosing the longest-lived lets a caller that asked with
	// an earlier minExpiry filter the answer for a later one.) With
	// methods non-nil, only an authorization validated by a challenge of
	// one of those types counts, or one born valid (no challenges: an
	// external account binding pre-validated it): an order's profile
	// reuses only what a method it offers validated. nil: any method (an
	// account's authority to revoke, RFC 8555 §7.6).
	AuthzsReusable(ctx context.Context, accountID string, keys []AuthzKey, methods []acme.ChallengeType, minExpiry time.Time) (found []*Authorization, err error)
	// AuthzDeactivate moves a pending or valid authorization to deactivated
	// and the orders that use it (pending or ready) to invalid.
	AuthzDeactivate(ctx context.Context, id string) (*Authorization, error)

	// ChallengeClaim compare-and-swaps the challenge pending → processing and
	// inserts challenge_validate in the same transaction. claimed is false
	// when the challenge was not pending (a repeated POST); the current
	// challenge is returned either way. A failed insert leaves it pending.
	//
	// With a nonce in u (a request whose nonce is not consumed yet) the
	// same transaction, one round trip on PostgreSQL, also consumes it and
	// checks that u's account is still valid with u.KeyJWK, and the
	// challenge's authorization must be that account's. If any of these
	// fails nothing is committed or read: claimed is false, c nil, and the
	// caller's read, which consumes the nonce (NonceConsume), says why.
	ChallengeClaim(ctx context.Context, u SignedUse, challengeID string) (c *Challenge, claimed bool, err error)
	// ChallengeVerdict records a validator's verdict on a processing
	// challenge and moves its authorization (valid, or invalid with the
	// others of that authz) and the orders using it (ready or invalid), in
	// one transaction. It does not touch the challenge_validate job: River
	// completes it after the handler returns. ErrConflict if the challenge
	// is not processing (a verdict is terminal).
	ChallengeVerdict(ctx context.Context, v Verdict) error

	// OrderFinalizeBegin compare-and-swaps the order ready → processing,
	// stores the CSR and its key's hash (KeyHash of the CSR's
	// SubjectPublicKeyInfo) and inserts signer_issue in the same
	// transaction. claimed is false when the order was not ready, or when
	// keyHash is blocked (BlockedKeys: the caller reads KeyBlockedBy to
	// tell). profile is the
	// order's, as the caller read it: the job, queued on the profile's
	// queue, goes out with the swap, before its result is back. An order
	// of another profile is an error and nothing moves.
	// With a nonce in u, as ChallengeClaim: the order must also be u's
	// account's, and a claim that fails commits and reads nothing.
	OrderFinalizeBegin(ctx context.Context, u SignedUse, orderID, profile string, csrDER, keyHash []byte) (o *Order, claimed bool, err error)
	// OrderIssued stores the certificate and moves the order processing →
	// valid, in one transaction; ErrConflict if the order is not processing.
	// The compare-and-swap also requires the order's account and every
	// one of its authorizations to be valid still: an order processing
	// without them stores nothing and the error is ErrUnauthorized.
	// River completes the signer_issue job after the handler returns.
	OrderIssued(ctx context.Context, in Issued) error
	// UndeliveredRecord stores certificate c, signed for order c.OrderID
	// when the order could no longer take it (it left processing, or its
	// account or an authorization stopped being valid, while it was
	// signed), so the CA holds no signature it has no record of. In one
	// transaction with ev: when Hallmark is its issuer, revoked with reason
	// and its issuer's next CRL queued; when a relay or custom backend
	// issued it (RemoteIssuer), a signer_revoke job on c.Profile's queue
	// asks that backend to. It does not count toward the
	// certificates-per-domain limit. ErrConflict if the serial is stored.
	UndeliveredRecord(ctx context.Context, c Certificate, reason int, ev AuditEvent) error
	// OrderFail moves a processing order to invalid with the problem;
	// ErrConflict if it is not processing. River completes the signer_issue
	// job after the handler returns.
	OrderFail(ctx context.Context, orderID string, p acme.Problem) error

	CertificateBySerial(ctx context.Context, serial string) (*Certificate, error)
	CertificatesList(ctx context.Context, f CertFilter, p Page) ([]*Certificate, string, error)

	// Revoke records a revocation of a local-CA certificate, stamps it on
	// the certificate and inserts crl_generate for its issuer, in one
	// transaction; ErrConflict if it is already revoked. The audit event is
	// written in the same transaction. With reason keyCompromise it also
	// blocks the certificate's key and revokes the key's other
	// certificates, as KeyBlock does. A relay's or custom backend's
	// certificate (RemoteIssuer) is refused and left unrevoked: Hallmark
	// signs no CRL for its issuer, so a row would revoke nothing.
	Revoke(ctx context.Context, serial string, reason int, ev AuditEvent) (*Certificate, error)
	// RevokeForKeyCompromise records that the key of a local-CA certificate
	// revoked already, for another reason, was compromised: its reason
	// becomes keyCompromise (its revocation time stays), its issuer's next
	// CRL is queued, its key is blocked and the key's other certificates
	// revoked, as Revoke with reason keyCompromise does, all in one
	// transaction with ev. ErrConflict if it is not revoked or is revoked
	// with reason keyCompromise already. A relay's or custom backend's
	// certificate is refused: its backend's record of the reason is the
	// one that counts, and Hallmark cannot change it.
	RevokeForKeyCompromise(ctx context.Context, serial string, ev AuditEvent) (*Certificate, error)
	// RevokeMany is Revoke for a page of local-CA certificates in one
	// transaction: it revokes those of serials that exist and are not
	// revoked yet, and returns them as revoked, in serials' order. A serial
	// it does not return was unknown or already revoked (perhaps a moment
	// before, by someone else): it is left as it is, never revoked twice.
	// Each certificate revoked has its revocation row and its audit event
	// (ev with the serial as its subject); each issuer touched has one
	// crl_generate job, not one per certificate. With reason
	// keyCompromise each one's key is blocked and its other certificates
	// revoked, as Revoke does. A relay's or custom backend's certificate
	// among them fails the whole call, and nothing is revoked.
	RevokeMany(ctx context.Context, serials []string, reason int, ev AuditEvent) ([]*Certificate, error)
	// RevokeQueue inserts signer_revoke for a relay/custom certificate on
	// profile's queue: a worker mounting that profile's backend runs it. It
	// returns the job's id, for RevokeProgress: the new job's, or that of
	// the certificate's job still outstanding, which River's uniqueness
	// keeps instead of a second (jobs.SignerRevokeArgs).
	RevokeQueue(ctx context.Context, serial, profile string, reason int, ev AuditEvent) (jobID int64, err error)
	// Revocations are the entries of every shard of the issuer's CRL now,
	// on the database's clock (CRLEntries' rule).
	Revocations(ctx context.Context, issuerID string) ([]Revocation, error)
	// RevokedCount counts the issuer's revoked certificates, however they
	// were revoked: a relay's or custom backend's issuer has revoked
	// certificates (RevokeRecorded) and no revocation rows.
	RevokedCount(ctx context.Context, issuerID string) (int, error)

	// CRLEntries are the entries the issuer's CRL shard lists at asOf:
	// every revocation of its certificates but those that have expired
	// and were listed by a stored CRL of the shard.
	CRLEntries(ctx context.Context, issuerID string, shard int, asOf time.Time) ([]Revocation, error)
	// CRLStore saves a signed CRL of a shard and marks c.Listed listed;
	// ErrConflict if its number is not greater than the shard's newest
	// (numbers are monotonic per shard).
	CRLStore(ctx context.Context, c CRL) error
	// CRLLatest is the newest CRL of shard 0 (the unsharded URL's).
	CRLLatest(ctx context.Context, issuerID string) (*CRL, error)
	CRLShardLatest(ctx context.Context, issuerID string, shard int) (*CRL, error)
	// CRLShards is the newest CRL of every shard that has one, by shard.
	CRLShards(ctx context.Context, issuerID string) ([]*CRL, error)
	// CRLNextNumber is one more than the shard's newest stored number (1
	// for none).
	CRLNextNumber(ctx context.Context, issuerID string, shard int) (int64, error)

	// TryLock takes or renews the named lease for holder until now+ttl on the
	// database's clock; false if another holder's lease is live.
	TryLock(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
	Unlock(ctx context.Context, name, holder string) error

	// IssuerPublish stores an issuing CA's certificate (DER) under its id;
	// IssuerCert reads it back (ErrNotFound if never published). The worker
	// publishes what it mounts; the frontend serves it at the AIA URL.
	IssuerPublish(ctx context.Context, id string, der []byte) error
	IssuerCert(ctx context.Context, id string) ([]byte, error)

	AuditRecord(ctx context.Context, ev AuditEvent) error
	AuditList(ctx context.Context, p Page) ([]AuditEvent, string, error)
	Reloads // reload.go

	// ExpirePending moves pending authorizations and pending/ready orders
	// past their expiry to expired (invalid for orders, RFC 8555 §7.1.6).
	ExpirePending(ctx context.Context) (int64, error)
	// Stranded lists challenges and orders left processing since before
	// olderThan with no outstanding job, for jobs.Recover.
	Stranded(ctx context.Context, olderThan time.Time) ([]jobs.Subject, error)
	// Requeue inserts the job a stranded subject needs.
	Requeue(ctx context.Context, s jobs.Subject) error
	// Abandon records a serverInternal failure on a subject so no client
	// polls forever: the challenge (and its authz, orders) or order becomes
	// invalid. It reports whether it did: false, with no error, for a
	// subject that is no longer processing (it already has its verdict).
	Abandon(ctx context.Context, s jobs.Subject, p acme.Problem) (bool, error)

	// Beat and RescueLapsed are the workers' heartbeats and the rescue of
	// a lapsed worker's jobs (jobs.Liveness, migration 0019); HeartbeatGC
	// deletes the heartbeats lapsed before a time.
	Beat(ctx context.Context, worker string, since time.Time, bound time.Duration) (jobs.Beat, error)
	RescueLapsed(ctx context.Context, rescuer string) ([]jobs.Rescued, error)
	HeartbeatGC(ctx context.Context, before time.Time) (int64, error)
}
