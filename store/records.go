package store

import (
	"encoding/json"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/origin"
)

// Account is an ACME account (RFC 8555 §7.1.2).
type Account struct {
	ID          string
	KeyJWK      json.RawMessage // the account's public key as a JWK
	Thumbprint  string          // RFC 7638 SHA-256 thumbprint of KeyJWK, base64url; unique
	Contact     []string
	Status      acme.Status // valid, deactivated or revoked
	TermsAgreed bool
	CreatedAt   time.Time
}

// Order is an ACME order (RFC 8555 §7.1.3). Its status is stored and moved by
// the store's operations, never derived by callers.
type Order struct {
	ID          string
	AccountID   string
	Status      acme.Status
	Identifiers []acme.Identifier
	Profile     string
	NotBefore   *time.Time // requested certificate validity, if the profile allows
	NotAfter    *time.Time
	Expires     time.Time
	AuthzIDs    []string
	CSR         []byte // DER, set by OrderFinalizeBegin
	CertSerial  string // set when the order is valid
	Error       *acme.Problem
	Replaces    string // ARI: the certificate ID this order replaces
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// Authorization is an ACME authorization (RFC 8555 §7.1.4). Identifier is the
// base name (no "*."); Wildcard says the order asked for "*.<name>".
type Authorization struct {
	ID         string
	AccountID  string
	Identifier acme.Identifier
	Wildcard   bool
	Status     acme.Status
	Expires    time.Time
	Challenges []Challenge
	CreatedAt  time.Time
}

// Challenge is an ACME challenge (RFC 8555 §7.1.5).
type Challenge struct {
	ID        string
	AuthzID   string
	Type      acme.ChallengeType
	Token     string
	Status    acme.Status
	Validated *time.Time
	Error     *acme.Problem
	// ValidationRecord is what the validator saw (addresses tried, URLs),
	// as JSON for the client and the admin panel.
	ValidationRecord json.RawMessage
}

// StaleValidation is an authorization of an order and the challenge that
// validated it, when that was long enough ago to check CAA again.
type StaleValidation struct {
	Identifier acme.Identifier // the base name (no "*.")
	Wildcard   bool
	Method     acme.ChallengeType
	Validated  time.Time
}

// Certificate is an issued certificate and its chain.
type Certificate struct {
	Serial    string // lower-case hex, unique
	OrderID   string
	AccountID string
	IssuerID  string // names the issuing CA (its key id), for CRLs
	Profile   string
	DER       []byte // the end-entity certificate
	ChainPEM  []byte // end entity followed by intermediates, PEM
	Names     []string
	NotBefore time.Time
	NotAfter  time.Time
	IssuedAt  time.Time
	// SPKIHash is KeyHash of the certificate's key, set by whoever stores
	// it (the worker, from the signed certificate); nil for a certificate
	// stored before migration 0012.
	SPKIHash []byte
	// CRLShard is the shard of its issuer's CRL that lists it when revoked,
	// named by its CRL distribution point; 0 for one stored before sharding
	// (the unsharded URL is shard 0's).
	CRLShard int
	// Revocation, when revoked.
	RevokedAt        *time.Time
	RevocationReason int
	ReplacedBy       string // ARI: the order that replaced it
}

// Revocation is one entry of an issuer's CRL shard.
type Revocation struct {
	Serial    string
	IssuerID  string
	RevokedAt time.Time
	Reason    int
	Shard     int
	// Listed reports whether a stored CRL of its shard has listed it: once
	// it has and its certificate has expired, it leaves the shard.
	Listed bool
}

// CRL is one signed CRL of an issuer's shard. Numbers increase
// monotonically per issuer and shard.
type CRL struct {
	IssuerID   string
	Shard      int
	Number     int64
	ThisUpdate time.Time
	NextUpdate time.Time
	DER        []byte
	// Listed are the serials this CRL lists for the first time, which
	// CRLStore marks listed in the same transaction (not read back).
	Listed []string
}

// AuditEvent is an operator or system action, or an event of the
// issuance trail (Trail), kept in one log for the admin panel and
// `hallmark audit list`.
type AuditEvent struct {
	ID      int64
	Actor   string // "cli:<user>", "admin:<user>", "acme:<account id>", "worker:<id>"
	Action  string // "revoke", "account.deactivate", "job.retry", "certificate.issued", ...
	Subject string // the serial, order id, account id or job id acted on
	Detail  string
	At      time.Time
	// Trail marks an event of the issuance trail (TrailActions): kept
	// audit.retention_days, then deleted (AuditPrune). Operator and
	// system actions are kept for good.
	Trail bool
	// Origin is the request the event comes from: its id, client
	// address, PTR name and user agent; zero for an operator's action.
	Origin origin.Origin
	// Seq, PrevHash and Hash are the event's place in its chain (the
	// operators' or the trail's, AuditPreimage), set by the database on
	// insert; Seq 0 for an event recorded before the chain existed.
	Seq      int64
	PrevHash string
	Hash     string
}
