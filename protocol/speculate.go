package protocol

import (
	"runtime"
	"sync"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/jws"
)

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
// Server.lastKeys maps account id to the stored key JSON seen on its
// latest request; unlike memo's other users its entries may go stale,
// which is why they are only ever a guess.
//
// Speculations run on a few long-lived goroutines (specPool), one per CPU:
// a fresh goroutine per request grew its stack for the elliptic-curve code
// every time (3% of a busy frontend's CPU). When they are all busy the
// request verifies inline as before: on a loaded server there is no idle
// core for a speculation to use anyway.

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
// request, or returns nil when there is none to guess with or no goroutine
// free to do it.
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
	if !s.specs.submit(func() {
		payload, err := msg.Verify(key)
		sp.done <- verifyResult{payload, err}
	}) {
		return nil
	}
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

// specPool runs speculations on at most GOMAXPROCS goroutines, each of
// which exits after specIdle without work (the server has no Close).
type specPool struct {
	jobs chan func() // unbuffered: a send succeeds only to an idle goroutine
	mu   sync.Mutex
	n    int
}

const specIdle = time.Second

// submit runs job on an idle pool goroutine, or a new one if there are
// fewer than GOMAXPROCS; false, without running it, when all are busy.
func (p *specPool) submit(job func()) bool {
	select {
	case p.jobs <- job:
		return true
	default:
	}
	p.mu.Lock()
	if p.n >= runtime.GOMAXPROCS(0) {
		p.mu.Unlock()
		return false
	}
	p.n++
	p.mu.Unlock()
	go p.run(job)
	return true
}

func (p *specPool) run(job func()) {
	t := time.NewTimer(specIdle)
	defer t.Stop()
	for {
		job()
		t.Reset(specIdle)
		select {
		case job = <-p.jobs:
		case <-t.C:
			// A submit that finds no goroutine waiting and all of them
			// counted skips its speculation: never a lost job.
			p.mu.Lock()
			p.n--
			p.mu.Unlock()
			return
		}
	}
}
