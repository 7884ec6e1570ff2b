package protocol

import (
	"net/http"
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
// whichever it is: the claim, or a read the handler needs first (redeem),
// which confirms the account as the ordinary path does. A claim that
// commits nothing consumes nothing: the handler's read then consumes the
// nonce and says why (a replayed nonce is badNonce, a challenge of
// another account unauthorized), as does an error before any store call
// (settle). Nothing is written before the request is verified.

// deferred is sg's request as a post whose nonce is left for its claim,
// or nil when it cannot be: its nonce fails the local checks, or there is
// no key to verify it with, or it does not verify with it (the key may
// have changed: the ordinary path verifies with the key it reads). p.acct
// is the account as the key names it: its ID and that key, valid, until
// the claim's transaction or redeem confirms it.
func (s *Server) deferred(r *http.Request, sg *signed) *post {
	use, ok := s.nonces.Local(sg.msg.Nonce)
	if !ok || !aheadID(sg.acctID) {
		return nil
	}
	if sg.guess = s.guess(sg.msg, sg.acctID); sg.guess == nil || sg.guess.err != nil {
		return nil
	}
	jwk := []byte(sg.guess.jwk)
	return &post{r: r, url: sg.url, payload: sg.guess.payload, mark: s.mark(), msg: sg.msg,
		acct: &store.Account{ID: sg.acctID, KeyJWK: jwk, Status: acme.StatusValid},
		use:  &store.SignedUse{Nonce: use, AccountID: sg.acctID, KeyJWK: jwk}}
}

// redeem consumes p's nonce if its claim has not, confirms its account
// (valid, with the key the request verified with) and reads l in the same
// round trip (protocol/nonce), as the ordinary path does before its
// handler: p then holds the account, the database's clock and l's read.
func (s *Server) redeem(p *post, l store.Lookup) error {
	u := p.use
	if u == nil {
		return nil
	}
	p.use = nil
	if !aheadID(l.ID) {
		l = store.Lookup{}
	}
	ctx := p.r.Context()
	red := s.nonces.Begin(ctx, u.Nonce.Nonce, u.AccountID, l, nil)
	acct, now, err := red.Wait(ctx)
	if err != nil {
		return s.storeErr(err, "consuming the nonce")
	}
	s.metrics.redeemed.Inc()
	s.clock.observe(now)
	p.now = now
	if v, err, ok := red.Found(); ok {
		p.ahead, p.aheadOf = &aheadResult{v: v, err: err}, l
	}
	key, err := s.accountKey(p.msg.KeyID, acct)
	if err != nil {
		return err
	}
	if string(acct.KeyJWK) != string(u.KeyJWK) {
		// The key changed since: the request must verify with the new one.
		s.lastKeys.put(acct.ID, string(acct.KeyJWK))
		if _, err := p.msg.Verify(key); err != nil {
			return err
		}
	}
	p.acct = acct
	return nil
}

// claimed marks p's nonce consumed by a claim that won.
func (s *Server) claimed(p *post) {
	if p.use != nil {
		p.use = nil
		s.metrics.redeemed.Inc()
	}
}

// settle is err, a handler's answer to p, once p's nonce is consumed and
// its account confirmed: a replayed nonce or an account that can no
// longer sign is the answer in its place, as on the ordinary path, where
// they are checked first.
func (s *Server) settle(p *post, err error) error {
	if err == nil || p.use == nil {
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
