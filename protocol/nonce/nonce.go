package nonce

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// Store is what nonces need from the store (store.Store satisfies it).
type Store interface {
	// NonceKey returns the shared HMAC key, creating it on first use.
	NonceKey(ctx context.Context) ([]byte, error)
	// NonceEpoch returns the current epoch, starting one if there is none.
	NonceEpoch(ctx context.Context) (int64, error)
	// NonceConsume consumes a batch of nonces and reads the accounts their
	// requests name, answering each use in order.
	NonceConsume(ctx context.Context, uses []store.NonceUse) ([]store.NonceUsed, error)
}

var errShortAnswer = errors.New("the store answered fewer nonce uses than it was asked")

// Layout of a decoded nonce: 8-byte big-endian unix seconds of issue, the
// 8-byte big-endian epoch it was minted in, 16 random bytes, then the first
// 16 bytes of HMAC-SHA256(key, time||epoch||random).
//
// The epoch is the store's (store.Nonces): on PostgreSQL a crash empties
// the consumed set and the epoch together, and nonces of an earlier epoch
// are refused, so a nonce consumed before the crash is never accepted again.
const (
	timeLen   = 8
	epochLen  = 8
	randLen   = 16
	macLen    = 16
	bodyLen   = timeLen + epochLen + randLen
	nonceLen  = bodyLen + macLen
	minKeyLen = 16
)

// Skew is how far in the future an issue time may be and still be accepted:
// replicas' clocks differ a little, and a nonce from a replica whose clock
// runs ahead must still redeem at one that runs behind.
const Skew = 30 * time.Second

// Service issues and redeems nonces.
type Service struct {
	st       Store
	batch    *batcher
	key      []byte
	epoch    atomic.Int64 // the epoch Issue mints in; updated when the store reports a new one
	lifetime time.Duration
	now      func() time.Time
}

// New loads the shared HMAC key once. lifetime is how long an issued nonce
// stays good; it bounds both the replay window and the consumed set's size.
func New(ctx context.Context, st Store, lifetime time.Duration) (*Service, error) {
	if lifetime <= 0 {
		return nil, fmt.Errorf("nonce lifetime must be positive, got %s", lifetime)
	}
	key, err := st.NonceKey(ctx)
	if err != nil {
		return nil, fmt.Errorf("loading nonce key: %w", err)
	}
	if len(key) < minKeyLen {
		return nil, fmt.Errorf("nonce key is %d bytes; at least %d are needed", len(key), minKeyLen)
	}
	epoch, err := st.NonceEpoch(ctx)
	if err != nil {
		return nil, fmt.Errorf("loading nonce epoch: %w", err)
	}
	s := &Service{st: st, batch: &batcher{st: st}, key: append([]byte(nil), key...), lifetime: lifetime, now: time.Now}
	s.epoch.Store(epoch)
	return s, nil
}

// Issue mints a fresh nonce. It writes nothing: the nonce carries its own
// proof of origin and age.
func (s *Service) Issue() string {
	var b [nonceLen]byte
	binary.BigEndian.PutUint64(b[:timeLen], uint64(s.now().Unix()))
	binary.BigEndian.PutUint64(b[timeLen:timeLen+epochLen], uint64(s.epoch.Load()))
	// crypto/rand.Read never returns an error (Go 1.24+); it crashes the
	// program instead of handing out a predictable nonce.
	_, _ = rand.Read(b[timeLen+epochLen : bodyLen])
	copy(b[bodyLen:], s.mac(b[:bodyLen]))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Redemption is a nonce's consumption as Begin started it: answered
// already, or in a flush on another goroutine. Its outcome is Wait's.
type Redemption struct {
	s      *Service
	epoch  int64 // the epoch the nonce was minted in
	c      *call // nil when the nonce failed the checks that need no store
	err    error
	waited bool // Wait returned c's answer
}

// Begin starts a nonce's redemption for a request signed by the account
// accountID ("" for none): it checks what needs no database (the nonce's
// length, authenticator and age) at once and, if those pass, starts the
// store round trip that consumes it and reads accountID and lookup (the
// row the request's URL names; Found has it), and runs meanwhile, work of
// the caller's that trusts nothing in the request, while the database
// works. With no other round trip in flight it makes the round trip itself,
// under ctx; otherwise it joins the next batch. meanwhile (which may be
// nil) runs on the caller's goroutine before Begin returns, unless the
// nonce failed the local checks or the store failed before its round trip
// started. The caller must call Wait for the verdict.
func (s *Service) Begin(ctx context.Context, nonce, accountID string, lookup store.Lookup, meanwhile func()) *Redemption {
	expires, epoch, err := s.check(nonce)
	if err != nil {
		return &Redemption{s: s, err: err}
	}
	c := s.batch.start(ctx, store.NonceUse{Nonce: nonce, Expires: expires, AccountID: accountID, Epoch: epoch, Lookup: lookup}, meanwhile)
	return &Redemption{s: s, epoch: epoch, c: c}
}

// Local is nonce as the store consumes it (store.NonceUse: no account, no
// lookup), if it passes Begin's local checks; ok is false when it does
// not, and Begin would refuse it. It consumes nothing: for a write that
// consumes its nonce in its own transaction (store.SignedUse).
func (s *Service) Local(nonce string) (u store.NonceUse, ok bool) {
	expires, epoch, err := s.check(nonce)
	if err != nil {
		return store.NonceUse{}, false
	}
	return store.NonceUse{Nonce: nonce, Expires: expires, Epoch: epoch}, true
}

// Found is what Begin's lookup read, once Wait has returned without error:
// ok is false when there was no lookup or no answer to it (the nonce was
// refused, or a duplicate in its batch), and the caller reads for itself.
// Nothing in it is trusted until the request is verified.
func (r *Redemption) Found() (v any, err error, ok bool) {
	if r.c == nil || !r.waited || (r.c.res.Found == nil && r.c.res.FoundErr == nil) {
		return nil, nil, false
	}
	return r.c.res.Found, r.c.res.FoundErr, true
}

// Wait is the answer for the nonce Begin started: the account its request
// names (nil if there is no such account) and the database clock, both
// read in the same store round trip as the nonce is consumed. The nonce
// is judged first: a malformed, forged, expired or replayed nonce is
// badNonce (RFC 8555 §6.5), whose detail says which, so the client
// retries with the fresh nonce the error response carries, whatever the
// account. A database failure is serverInternal: the client did nothing
// wrong.
func (r *Redemption) Wait(ctx context.Context) (*store.Account, time.Time, error) {
	if r.c == nil {
		return nil, time.Time{}, r.err
	}
	s := r.s
	got, err := r.c.wait(ctx)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return nil, time.Time{}, err // the caller's deadline: its own error path says "retry"
		}
		return nil, time.Time{}, acme.Internal(fmt.Errorf("consuming nonce: %w", err))
	}
	if got.Epoch != s.epoch.Load() {
		s.newEpoch(ctx, got.Epoch)
	}
	if !got.Fresh {
		if r.epoch != got.Epoch {
			return nil, time.Time{}, acme.BadNonce("the nonce is from an earlier nonce epoch (the server restarted, or its nonce store was reset); retry with the nonce in this response")
		}
		return nil, time.Time{}, acme.BadNonce("nonce has already been used")
	}
	if got.AccountErr != nil {
		return nil, time.Time{}, acme.Internal(fmt.Errorf("reading the account with the nonce: %w", got.AccountErr))
	}
	if got.Now.IsZero() {
		// Handlers take their "now" from here (expiries, validity).
		return nil, time.Time{}, acme.Internal(errors.New("the store consumed the nonce without reading its clock"))
	}
	r.waited = true
	return got.Account, got.Now, nil
}

// newEpoch adopts the epoch the store reported, or starts one when the
// store has none (PostgreSQL after a crash), so that the nonces Issue mints
// from now on are accepted. Failing to start one changes nothing: the next
// redemption tries again.
func (s *Service) newEpoch(ctx context.Context, reported int64) {
	if reported == 0 {
		var err error
		if reported, err = s.st.NonceEpoch(ctx); err != nil {
			return
		}
	}
	s.epoch.Store(reported)
}

// check verifies everything about a nonce that needs no database: its
// length, authenticator and age. It returns when the nonce expires and the
// epoch it was minted in.
func (s *Service) check(nonce string) (time.Time, int64, error) {
	if len(nonce) != base64.RawURLEncoding.EncodedLen(nonceLen) {
		return time.Time{}, 0, acme.BadNonce("the nonce was not issued by this server (wrong length); get a fresh one from newNonce")
	}
	b, err := base64.RawURLEncoding.DecodeString(nonce)
	if err != nil || len(b) != nonceLen {
		return time.Time{}, 0, acme.BadNonce("the nonce was not issued by this server (not base64url); get a fresh one from newNonce")
	}
	if !hmac.Equal(b[bodyLen:], s.mac(b[:bodyLen])) {
		return time.Time{}, 0, acme.BadNonce("the nonce was not issued by this server (bad authenticator); get a fresh one from newNonce")
	}
	secs := binary.BigEndian.Uint64(b[:timeLen])
	if secs > 1<<62 {
		// Authenticated but absurd: only a changed key could do this.
		return time.Time{}, 0, acme.BadNonce("the nonce has an impossible issue time; get a fresh one from newNonce")
	}
	issued := time.Unix(int64(secs), 0)
	now := s.now()
	if issued.After(now.Add(Skew)) {
		return time.Time{}, 0, acme.BadNonce("the nonce's issue time is in the future; the server clocks disagree, get a fresh one from newNonce")
	}
	expires := issued.Add(s.lifetime)
	if !now.Before(expires) {
		return time.Time{}, 0, acme.BadNonce("the nonce has expired; get a fresh one from newNonce")
	}
	return expires, int64(binary.BigEndian.Uint64(b[timeLen : timeLen+epochLen])), nil
}

func (s *Service) mac(body []byte) []byte {
	h := hmac.New(sha256.New, s.key)
	h.Write(body)
	return h.Sum(nil)[:macLen]
}

// Derive is a key for another purpose of the frontends' (label names it),
// derived from the shared nonce key: every frontend derives the same one,
// and it reveals nothing of the nonce key.
func (s *Service) Derive(label string) []byte {
	h := hmac.New(sha256.New, s.key)
	h.Write([]byte("hallmark derived key: " + label))
	return h.Sum(nil)
}
