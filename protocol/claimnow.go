package protocol

import (
	"slices"
	"sync"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// A claim at once: a challenge POST, a finalize or a newOrder, verified
// with the key its account had on its last request (Server.lastKeys)
// before anything is sent, leaves its nonce for the claim's own
// transaction (post.use), which consumes it, checks that the account is
// still valid with that very key, and claims: one round trip on
// PostgreSQL (store.SignedUse). Its first store call consumes the nonce,
// whichever it is: the claim, or a read the handler needs first (redeem,
// every request's). A claim that commits nothing consumes nothing: the
// handler's read then consumes the nonce and says why (a replayed nonce is
// badNonce, a challenge of another account unauthorized), as does an
// error before any store call (settle). Nothing is written before the
// request is verified.

// deferred leaves p's nonce for its claim, or reports false when it
// cannot: the nonce fails the local checks, or there is no key to verify
// p with, or p does not verify with it (the key may have changed: redeem
// verifies with the key it reads). p.acct is then the account as that key
// names it, valid, until the claim's transaction or redeem confirms it.
func (s *Server) deferred(p *post) bool {
	sg := p.sg
	use, ok := s.nonces.Local(sg.msg.Nonce)
	if !ok || !aheadID(sg.acctID) {
		return false
	}
	if sg.guess = s.guess(sg.msg, sg.acctID); sg.guess == nil || sg.guess.err != nil {
		return false
	}
	jwk := []byte(sg.guess.jwk)
	p.payload = sg.guess.payload
	p.acct = &store.Account{ID: sg.acctID, KeyJWK: jwk, Status: acme.StatusValid}
	p.use = &store.SignedUse{Nonce: use, AccountID: sg.acctID, KeyJWK: jwk}
	return true
}

// claimed marks p's nonce consumed by a claim that won.
func (s *Server) claimed(p *post) {
	p.sg, p.use = nil, nil
	s.metrics.redeemed.Inc()
}

// settle is err, a handler's answer to p, once p's nonce is consumed and
// its account confirmed (redeem): a replayed nonce or an account that can
// no longer sign is the answer in its place, as on the ordinary path,
// where they are checked first.
func (s *Server) settle(p *post, err error) error {
	if err == nil || p.sg == nil {
		return err
	}
	if rerr := s.redeem(p, store.Lookup{}); rerr != nil {
		return rerr
	}
	return err
}

// orderFacts is what never changes about an order: enough to check a
// finalize's CSR before the transaction that claims the order.
type orderFacts struct {
	accountID   string
	profile     string
	identifiers []acme.Identifier
}

// rememberOrder keeps o's facts for a finalize claimed at once
// (Server.orders).
func (s *Server) rememberOrder(o *store.Order) {
	s.orders.put(o.ID, orderFacts{accountID: o.AccountID, profile: o.Profile, identifiers: slices.Clone(o.Identifiers)})
}

// dbClock is the database's clock as this frontend last saw it: the time
// a nonce answer carried (store.NonceUsed), against this process's clock
// when the answer came. A newOrder claimed at once computes its order's
// times from it, as the ordinary path does from the answer itself, and
// its transaction refuses an estimate more than store.ClockSlack off
// (store.NewOrder.Clock).
type dbClock struct {
	mu     sync.Mutex
	offset time.Duration // the database's clock less ours
	seen   time.Time     // when, on ours; zero: never
}

// clockFresh is how long a reading is used for. Clocks drift far slower;
// this bounds how long a stepped clock on either side goes unnoticed
// (until the transaction's own check refuses it).
const clockFresh = time.Minute

func (c *dbClock) observe(db time.Time) {
	if db.IsZero() {
		return
	}
	now := time.Now()
	c.mu.Lock()
	c.offset, c.seen = db.Sub(now), now
	c.mu.Unlock()
}

// estimate is the database's clock now, by the last reading, or false
// when there is none younger than clockFresh.
func (c *dbClock) estimate() (time.Time, bool) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen.IsZero() || now.Sub(c.seen) > clockFresh {
		return time.Time{}, false
	}
	return now.Add(c.offset).Round(0), true
}
