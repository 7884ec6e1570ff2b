package protocol

import "github.com/hallmark-ca/hallmark/protocol/jws"

// A request signed with "kid" is verified with the account key read from
// the database together with its nonce (verified). That read is a store
// round trip, and verifying a P-256 signature is ~0.1 ms of CPU; with the
// key the account had on its last request, the signature is checked on
// another core while the nonce is consumed. The key that comes back with the
// nonce decides: if it is the same JSON the speculation used, its result is
// the result; if not (a key change, a first request), the speculation is
// dropped and the request verified with the key just read. A stale entry
// can therefore cost a wasted verification, never a wrong answer.
//
// lastKeys maps account id to the stored key JSON seen on its latest
// request; unlike memo's other users its entries may go stale, which is
// why they are only ever a guess.

// speculation is one signature check running beside the nonce's round trip.
type speculation struct {
	jwk  string // the stored key JSON it verifies with
	done chan verifyResult
}

type verifyResult struct {
	payload []byte
	err     error
}

// speculate starts verifying msg with the key accountID had on its last
// request, or returns nil when there is none to guess with.
func (s *Server) speculate(msg *jws.Message, accountID string) *speculation {
	jwk, ok := s.lastKeys.get(accountID)
	if !ok {
		return nil
	}
	key, err := s.keys.parse([]byte(jwk))
	if err != nil {
		return nil
	}
	sp := &speculation{jwk: jwk, done: make(chan verifyResult, 1)}
	go func() {
		payload, err := msg.Verify(key)
		sp.done <- verifyResult{payload, err}
	}()
	return sp
}

// resultFor is the speculation's answer if it verified with jwk; ok is
// false otherwise. Either way it waits for the speculation to finish, so
// the caller may use msg again.
func (sp *speculation) resultFor(jwk []byte) (r verifyResult, ok bool) {
	if sp == nil {
		return verifyResult{}, false
	}
	r = <-sp.done
	return r, sp.jwk == string(jwk)
}
