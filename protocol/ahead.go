package protocol

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/gorilla/mux"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/jws"
	"github.com/hallmark-ca/hallmark/store"
)

// Work done ahead: a request's nonce is consumed, the account its "kid"
// names read, and the route's first read made (the order, authorization,
// challenge or certificate the URL names, or for newOrder the account's
// reusable authorizations for the identifiers the payload names as sent:
// a route's readAhead), all in one
// store round trip on the nonce batcher's goroutine (protocol/nonce), in
// one batch with other requests' (store.NonceUse.Lookup). While that round
// trip is out, the request's own goroutine checks the signature with the
// key the account had on its last request (Server.lastKeys). The key read
// with the nonce decides: if it is the JSON the guess used, the guess's
// result is the result; if not (a key change, a first request) the request
// is verified again with the key just read. A stale guess costs a wasted
// verification, never a wrong answer.
//
// The read made ahead is not trusted until the request is verified: the
// handler takes it (aheadOr) only then, and checks ownership as before; a
// request that fails verification throws it away. Riding in the nonce's
// batch saves the round trip a separate store call would make.

// guessed is a signature check made with an account's previous key.
type guessed struct {
	jwk string // the stored key JSON it verified with
	verifyResult
}

type verifyResult struct {
	payload []byte
	err     error
}

// guess verifies msg with the key accountID had on its last request, or
// returns nil when there is none to guess with.
func (s *Server) guess(msg *jws.Message, accountID string) *guessed {
	jwk, ok := s.lastKeys.get(accountID)
	if !ok {
		return nil
	}
	key, err := s.keys.parse([]byte(jwk))
	if err != nil {
		return nil
	}
	payload, err := msg.Verify(key)
	return &guessed{jwk: jwk, verifyResult: verifyResult{payload, err}}
}

// resultFor is the guess's answer if it verified with jwk; ok is false
// otherwise.
func (g *guessed) resultFor(jwk []byte) (r verifyResult, ok bool) {
	if g == nil || g.jwk != string(jwk) {
		return verifyResult{}, false
	}
	return g.verifyResult, true
}

// readAhead names a route's first store read from the URL or from the
// payload as sent (jws.Message.UnverifiedPayload); for the account acctID
// names, which the same round trip reads. A zero Lookup reads nothing.
type readAhead func(r *http.Request, msg *jws.Message, acctID string) store.Lookup

// lookupOf is the readAhead of a route whose URL variable v names a row of
// kind.
func lookupOf(kind store.LookupKind, v string) readAhead {
	return func(r *http.Request, _ *jws.Message, _ string) store.Lookup {
		return store.Lookup{Kind: kind, ID: mux.Vars(r)[v]}
	}
}

// aheadID reports whether id may go into a shared batch: an ID or serial
// this server could have minted (base64url or hex, at most 64 characters).
// Anything else is read on its own by the handler, where it can only fail
// its own request: a text PostgreSQL cannot store (a NUL, invalid UTF-8)
// would fail every request in the batch.
func aheadID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	return strings.IndexFunc(id, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) < 0
}

// aheadResult is what a read made ahead found.
type aheadResult struct {
	v   any
	err error
}

// lookup makes l's read on its own: the route's first read when it was
// not made with the nonce.
func (s *Server) lookup(ctx context.Context, l store.Lookup) (any, error) {
	switch l.Kind {
	case store.LookupOrder:
		return found(s.st.verify.OrderByID(ctx, l.ID))
	case store.LookupAuthz:
		return found(s.st.verify.AuthzByID(ctx, l.ID))
	case store.LookupChallenge:
		return found(s.st.verify.ChallengeWithAuthz(ctx, l.ID))
	case store.LookupCert:
		return found(s.st.verify.CertificateBySerial(ctx, l.ID))
	}
	return nil, acme.Internal(fmt.Errorf("no read for lookup kind %d", l.Kind))
}

// found is a store read's answer as an any, never a typed nil.
func found[T any](v *T, err error) (any, error) {
	if err != nil || v == nil {
		return nil, err
	}
	return v, nil
}

// aheadOr is what ahead, the route's readAhead, read for p: the read made
// with the nonce or, when there was none, one made now with read. It takes
// the early read once; a handler that reads again gets a fresh answer.
func aheadOr[T any](p *post, ahead readAhead, read func(context.Context, store.Lookup) (any, error)) (T, error) {
	a := p.ahead
	p.ahead = nil
	if a == nil {
		v, err := read(p.r.Context(), ahead(p.r, nil, ""))
		a = &aheadResult{v: v, err: err}
	}
	var zero T
	if a.err != nil {
		return zero, a.err
	}
	v, ok := a.v.(T)
	if !ok {
		return zero, acme.Internal(fmt.Errorf("the read made ahead returned %T, not %T", a.v, zero))
	}
	return v, nil
}
