package store

import (
	"context"
	"time"
)

// IssuerState is where an issuer is in its life (migration 0024).
type IssuerState string

const (
	// IssuerActive: a profile may name it, and it signs for the profiles
	// that do.
	IssuerActive IssuerState = "active"
	// IssuerRetiring: it signs no certificate, only CRLs, until its last
	// certificate has expired.
	IssuerRetiring IssuerState = "retiring"
	// IssuerRetired: it signs nothing.
	IssuerRetired IssuerState = "retired"
)

// IssuerRecord is an issuer an operator manages: a local intermediate
// (its key in ca.dir) or one whose key is on a PKCS#11 token.
type IssuerRecord struct {
	ID      string // the hex of its SubjectKeyId, as everywhere
	Name    string // its subject's common name
	KeyType string // p256, p384, rsa2048, ...
	State   IssuerState
	// Backend is the [backends.<name>] (type pkcs11) whose token holds the
	// key, found there by KeyLabel and KeyID (hex CKA_ID); "" for a local
	// issuer (migration 0028).
	Backend   string
	KeyLabel  string
	KeyID     string
	NotAfter  time.Time
	CreatedAt time.Time
	// Chains are its alternate chains, PEM, each sent after the leaf
	// instead of the default chain (RFC 8555 §7.4.2).
	Chains [][]byte
	// Profiles name it (IssuerRecords only).
	Profiles []string
	// Outstanding counts its certificates not yet expired (IssuerRecords
	// only).
	Outstanding int
}

// ProfileIssuer is one issuer a profile signs with, newest first.
type ProfileIssuer struct {
	ID        string
	KeyType   string
	Backend   string // as IssuerRecord.Backend: "" for a local issuer
	CreatedAt time.Time
}

// IssuerRecords are the managed issuers and which profiles sign with them
// (store/sqlstore/issuerrecords.go).
type IssuerRecords interface {
	// IssuerRecordPut publishes an issuer's certificate (as IssuerPublish)
	// and records it, with its chains, keeping the state of a recorded one
	// (a new one is active); ev, when not nil, is audited with it.
	IssuerRecordPut(ctx context.Context, r IssuerRecord, der []byte, ev *AuditEvent) error
	// IssuerRecordsList lists every record with its profiles and its
	// outstanding certificates, newest first.
	IssuerRecordsList(ctx context.Context) ([]IssuerRecord, error)
	// ProfileIssuers maps each profile to the active issuers it signs
	// with, newest first; a profile without rows is absent.
	ProfileIssuers(ctx context.Context) (map[string][]ProfileIssuer, error)
	// ProfileIssuerDefault makes issuerID profile's issuer when the
	// profile names none yet (a worker's first start); false when it
	// named some already.
	ProfileIssuerDefault(ctx context.Context, profile, issuerID string) (bool, error)
	// IssuerRotate makes to the issuers of profile, in one transaction:
	// each must be active. Issuers no profile names any longer become
	// retiring; it returns them. Audited with ev.
	IssuerRotate(ctx context.Context, profile string, to []string, ev AuditEvent) ([]string, error)
	// IssuerRetire moves an active issuer no profile names to retiring,
	// and a retiring one with no certificate left unexpired to retired;
	// it returns the new state. ErrConflict when the issuer may not move
	// (a profile names it, or certificates are still outstanding).
	IssuerRetire(ctx context.Context, id string, ev AuditEvent) (IssuerState, error)
	// IssuerChains are the issuer's alternate chains, PEM, in order; none
	// for an issuer without a record.
	IssuerChains(ctx context.Context, id string) ([][]byte, error)
}
