package store

import (
	"context"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// NonceUse is one ACME POST's nonce to consume and the account its "kid"
// names ("" for a request signed with a "jwk", or a kid that names no
// account URL of this server).
type NonceUse struct {
	Nonce     string
	Expires   time.Time // when the nonce stops being accepted anyway; NonceGC forgets it after
	AccountID string
	// Epoch is the nonce epoch the nonce was minted under; a nonce from any
	// other epoch is not consumed (Fresh false).
	Epoch int64
	// Lookup is a read to make in the same round trip: the row the
	// request's URL names, read before the request is verified, so the
	// caller must not trust it until it is (LookupNone: no read).
	Lookup Lookup
}

// SignedUse is a request already verified, with the key its account had
// on an earlier request, whose nonce is not consumed yet: what a claim
// consumes and checks in its own transaction (ChallengeClaim,
// OrderFinalizeBegin, OrderCreate). The zero SignedUse is a request whose
// nonce was consumed before.
type SignedUse struct {
	Nonce     NonceUse // Nonce, Expires and Epoch; its AccountID and Lookup are not used
	AccountID string
	KeyJWK    []byte // the account key the request verified with, as the store holds it
}

// Lookup names what a request reads first: for a POST-as-GET or a
// challenge or finalize POST the one row its URL names (an order, an
// authorization with its challenges, a challenge with its authorization,
// or a certificate); for a newOrder the account's reusable
// authorizations. Reading it with the request's nonce saves the request a
// round trip of its own.
type Lookup struct {
	Kind LookupKind
	// ID is the order, authorization or challenge ID, the certificate's
	// serial, or (LookupReusable) the account's ID.
	ID string
	// Keys, Methods and After are LookupReusable's:
	// AuthzsReusable(ID, Keys, Methods, After).
	Keys    []AuthzKey
	Methods []acme.ChallengeType
	After   time.Time
}

// LookupKind is what a Lookup reads, and so the type of its Found:
// *Order, *Authorization, *ChallengeAuthz, *Certificate, or
// []*Authorization (one per key, as AuthzsReusable answers).
type LookupKind uint8

const (
	LookupNone LookupKind = iota
	LookupOrder
	LookupAuthz
	LookupChallenge
	LookupCert
	LookupReusable
)

// NonceUsed answers one NonceUse.
type NonceUsed struct {
	// Fresh is true when this use consumed the nonce; false when it had
	// been consumed before, here or at another replica, or earlier in the
	// same batch (RFC 8555 §6.5: a nonce is accepted once).
	Fresh bool
	// Account is the account AccountID names; nil when none was named or
	// none exists. AccountErr is set instead when the account's row was
	// found but could not be read: that request fails, the batch does not.
	Account    *Account
	AccountErr error
	// Now is the database clock when the batch ran: the request's "now" for
	// expiries and validity, without a round trip of its own.
	Now time.Time
	// Epoch is the current nonce epoch, 0 if there is none (PostgreSQL
	// after a crash, until NonceEpoch starts one).
	Epoch int64
	// Found is what the use's Lookup read, FoundErr why it read nothing
	// (ErrNotFound when there is no such row); both are nil without a
	// Lookup, or for a duplicate nonce, which is refused anyway.
	Found    any
	FoundErr error
}

// Nonces is the consumed-nonce set.
//
// On PostgreSQL the set is an unlogged table: consuming a nonce waits for
// no disk flush, and a crash empties the set. The epoch makes that safe: it
// lives in an unlogged table too, so the same crash removes it, and a nonce
// is consumed only under the epoch it was minted in (migration 0004).
//
// Every ACME POST consumes a nonce and nearly every one then reads its
// account. NonceConsume does both for a batch of concurrent requests in one
// round trip and one durable commit: on PostgreSQL a commit per request was
// the largest single cost of a busy frontend.
type Nonces interface {
	// NonceKey returns the HMAC key for nonces, generating and storing it on
	// first use so every replica shares one.
	NonceKey(ctx context.Context) ([]byte, error)
	// NonceEpoch returns the current nonce epoch (never 0), starting a new
	// random one if there is none.
	NonceEpoch(ctx context.Context) (int64, error)
	// NonceConsume consumes uses' nonces and reads their accounts and
	// lookups; the answers are in the order of uses. A use whose Epoch is not the
	// current one is answered Fresh false and consumes nothing. An error
	// means none was answered (and any may have been consumed: the requests
	// fail either way).
	NonceConsume(ctx context.Context, uses []NonceUse) ([]NonceUsed, error)
	// NonceGC forgets consumed nonces past their expiry.
	NonceGC(ctx context.Context) (int64, error)
}

// NoncesMeanwhile is a Nonces that can run work of the caller's while a
// consumption's round trip is in flight: NonceConsume, with meanwhile run
// once, on the caller's goroutine, after the statements have gone to the
// database and before their answer is read. On PostgreSQL the frontend
// checks the request's signature there, in the time the database takes to
// answer, without handing the round trip to another goroutine (whose
// wake-up, on an idle virtual CPU, cost as much as the check).
// When the call fails before its round trip starts (no connection),
// meanwhile is not run: the caller must not depend on it having run.
type NoncesMeanwhile interface {
	NonceConsumeMeanwhile(ctx context.Context, uses []NonceUse, meanwhile func()) ([]NonceUsed, error)
}
