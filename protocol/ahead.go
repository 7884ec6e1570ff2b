package protocol

import (
	"fmt"
	"net/http"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/jws"
)

// Work done ahead: a request's nonce is consumed, and the account its "kid"
// names read, in one store round trip on the nonce batcher's goroutine
// (protocol/nonce). While that round trip is out, the request's own
// goroutine does the work that needs neither its answer nor trust in the
// request (verified):
//
//   - It checks the signature with the key the account had on its last
//     request (Server.lastKeys). The key read with the nonce decides: if it
//     is the JSON the guess used, the guess's result is the result; if not
//     (a key change, a first request) the request is verified again with the
//     key just read. A stale guess costs a wasted verification, never a
//     wrong answer.
//   - It runs the handler's first read (a route's readAhead): the order,
//     authorization, challenge or certificate the URL names. The handler
//     takes it (aheadOr) only once the request has been verified, and
//     checks ownership as before; a request that fails verification throws
//     it away. On PostgreSQL the read runs on a second connection beside
//     the nonce's; on SQLite's one connection it queues right behind it.
//
// Both run inline, not on goroutines of their own: at one request at a time
// every hand-off between goroutines is a thread wake-up, which costs as
// much as the work.

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

// readAhead is a route's first store read, made from the URL alone.
type readAhead func(r *http.Request) (any, error)

// aheadResult is what a readAhead returned.
type aheadResult struct {
	v   any
	err error
}

// aheadOr is what read, the route's readAhead, returned for p: the read
// made while the nonce was consumed, or, when there was none, one made now.
// It takes the early read once; a handler that reads again gets a fresh
// answer.
func aheadOr[T any](p *post, read readAhead) (T, error) {
	a := p.ahead
	p.ahead = nil
	if a == nil {
		v, err := read(p.r)
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
