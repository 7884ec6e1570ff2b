package store

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// ReasonKeyCompromise is RFC 5280's CRLReason keyCompromise (1). A
// revocation recorded with it, by any path (Revoke, RevokeMany,
// RevokeRecorded), blocks the certificate's key and revokes the key's
// other unexpired certificates with it, in the same transaction
// (BlockedKeys).
const ReasonKeyCompromise = 1

// ActionKeyBlock is the audit action of a key blocked; ActionKeyRevoke
// that of a certificate revoked because its key was reported compromised
// through another certificate (or by an operator), each naming what
// reported it; ActionKeyUnblock that of a block an operator removed.
const (
	ActionKeyBlock   = "key.block"
	ActionKeyRevoke  = "revoke.key-compromise"
	ActionKeyUnblock = "key.unblock"
)

// KeyHash is what blocked_keys and certificates.spki_sha256 key a public
// key by: the SHA-256 of its DER SubjectPublicKeyInfo (as Boulder's
// blockedKeys does), the same for a certificate's, a CSR's and an
// account's key.
func KeyHash(spki []byte) []byte {
	h := sha256.Sum256(spki)
	return h[:]
}

// ParseKeyHash reads a KeyHash as people write it: 64 hex digits, either
// case, colons between bytes allowed; ok is false for anything else.
func ParseKeyHash(s string) (h []byte, ok bool) {
	h, err := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(s), ":", ""))
	return h, err == nil && len(h) == sha256.Size
}

// PublicKeyHash is KeyHash of a parsed public key.
func PublicKeyHash(pub any) ([]byte, error) {
	spki, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("encoding the public key: %w", err)
	}
	return KeyHash(spki), nil
}

// CertKeyHash is KeyHash of the key of a DER certificate.
func CertKeyHash(der []byte) ([]byte, error) {
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing the certificate: %w", err)
	}
	return KeyHash(c.RawSubjectPublicKeyInfo), nil
}

// BlockedKey is a key Hallmark will not certify again.
type BlockedKey struct {
	SPKIHash  []byte
	BlockedAt time.Time
	// Serial is the certificate of ours whose keyCompromise revocation
	// reported the key; "" when an operator blocked it without one.
	Serial string
	Why    string // what reported it, for the operator
	Actor  string // who, as audit events name actors
}

// Hex is the key's hash as hex, as the CLI and the audit log show it.
func (b BlockedKey) Hex() string { return hex.EncodeToString(b.SPKIHash) }

// Problem is the sentence a client operator reads when Hallmark refuses
// the key (what names it: "the CSR's public key", "the account key"):
// when it was reported, and that they need a new one.
func (b BlockedKey) Problem(what string) string {
	return fmt.Sprintf("%s was reported compromised on %s and is blocked; generate a new key", what, b.BlockedAt.UTC().Format(time.RFC3339))
}

// KeyBlockResult is what KeyBlock did: the key as blocked (the earlier row
// when it was blocked already) and the key's certificates it revoked
// (Hallmark's own: CRL queued) or queued for their backend to revoke
// (relay, custom: signer_revoke).
type KeyBlockResult struct {
	Key     BlockedKey
	Already bool // the key was blocked before this call
	Revoked []*Certificate
	Queued  []*Certificate
}

// BlockedKeys are the keys reported compromised (migration 0012).
type BlockedKeys interface {
	// KeyBlockedBy reads the block of the key whose hash is spkiHash;
	// ErrNotFound when it is not blocked.
	KeyBlockedBy(ctx context.Context, spkiHash []byte) (*BlockedKey, error)
	// KeyBlock blocks a key (k.SPKIHash, k.Why, k.Actor; k.Serial may be
	// empty) and revokes its unexpired, unrevoked certificates with reason
	// keyCompromise, as a keyCompromise revocation of one of them would,
	// in one transaction: the local ones with their revocation rows and
	// their issuers' crl_generate jobs, the relay/custom ones by a
	// signer_revoke job on their profile's queue, each with an audit
	// event. A key blocked already keeps its row (Already) and its
	// certificates are revoked all the same.
	KeyBlock(ctx context.Context, k BlockedKey) (KeyBlockResult, error)
	// KeyUnblock deletes the block of the key whose hash is spkiHash, so
	// Hallmark may certify it again (a block recorded by mistake), and
	// records ev in the same transaction. The certificates the block
	// revoked stay revoked. ErrNotFound when the key is not blocked.
	KeyUnblock(ctx context.Context, spkiHash []byte, ev AuditEvent) error
	// KeysBlocked lists the blocked keys, the latest blocked first, at
	// most limit of them (all when limit is 0): the operator's list.
	KeysBlocked(ctx context.Context, limit int) ([]BlockedKey, error)
	// KeySweep revokes, as KeyBlock does, the unexpired, unrevoked
	// certificates of the keys blocked since since that were stored no
	// earlier than margin before their key's block: the ones a block's
	// own search could not see. Such a certificate's order was read for
	// signing before the block and stored after it (the worker's read
	// and the certificate's insert bracket the signature), or in the
	// block's own moment. Housekeeping runs it every minute, well inside
	// BR §4.9.1.1's 24 hours. Certificates stored earlier than that were
	// the block's own to revoke; one its backend refused stays so.
	KeySweep(ctx context.Context, since time.Time, margin time.Duration) (KeyBlockResult, error)
	// KeyHashBackfill gives at most limit certificates with no key hash
	// (stored before migration 0012) the SHA-256 of their DER's
	// SubjectPublicKeyInfo, so that a key reported compromised finds them
	// among its certificates; a DER that does not parse gets an empty
	// hash, which matches no key, and is not read again. Those of a key
	// blocked already, unexpired and unrevoked, are revoked as KeyBlock
	// would have, in the same transaction. hashed is how many it hashed:
	// fewer than limit when none are left.
	KeyHashBackfill(ctx context.Context, limit int) (hashed int, revoked KeyBlockResult, err error)
}
