package protocol

import (
	"context"
	"net/http"

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
type readAhead func(ctx context.Context, r *http.Request) (any, error)

// aheadResult is what a readAhead returned.
type aheadResult struct {
	v   any
	err error
}

// aheadOr is the read made ahead for p if it produced a T (or an error), or
// read's answer when there was none (the guess and the read are skipped for
// a nonce that failed its local checks, and some routes have no read).
func aheadOr[T any](p *post, read func() (T, error)) (T, error) {
	if a := p.ahead; a != nil {
		p.ahead = nil // once: a handler that reads again wants a fresh answer
		if a.err != nil {
			var zero T
			return zero, a.err
		}
		if v, ok := a.v.(T); ok {
			return v, nil
		}
	}
	return read()
}
