package protocol

import (
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/jws"
	"github.com/hallmark-ca/hallmark/store"
)

// A folded write is a POST answered in one store transaction with its
// nonce: a challenge POST (ChallengeClaimSigned) or a finalize
// (OrderFinalizeSigned) consumes its nonce, checks its account and claims
// the challenge or order in one round trip on PostgreSQL, where the
// ordinary path takes two (the nonce's batch with the first read, then the
// claim); a newOrder (OrderCreateSigned) writes the order in that round
// trip.
//
// It is tried only on a store that folds (store.Store.Folds: PostgreSQL),
// and only for a request that verifies, before anything is sent,
// with the key its account had on its last request (Server.lastKeys); the
// transaction then checks that the account is still valid with that very
// key, so a key change or a deactivation since makes it commit nothing.
// Whatever does not hold (the nonce, the account, the route's own
// conditions) commits nothing and the request goes the ordinary way,
// which answers it as it always did: a replayed nonce is still badNonce,
// a challenge of another account still unauthorized. Nothing is written
// before the request is verified.
//
// folded is a route's fold: done is false when it did not answer (the
// request goes the ordinary way), and it must not have written to w then.
// p holds the request and its verified payload but no account: u names
// the account, and only the transaction vouches for it.
type folded func(w http.ResponseWriter, p *post, u store.SignedUse) (done bool, err error)

// tryFold runs fold for msg if its nonce passes the local checks and it
// verifies with its account's last key. g is that verification, for the
// ordinary path to use as its guess (ahead.go) rather than verify again.
func (s *Server) tryFold(w http.ResponseWriter, r *http.Request, url string, msg *jws.Message, acctID string, fold folded) (done bool, g *guessed, err error) {
	use, ok := s.nonces.Local(msg.Nonce)
	if !ok {
		return false, nil, nil
	}
	if g = s.guess(msg, acctID); g == nil || g.err != nil {
		// No key to verify with, or perhaps the key changed: the ordinary
		// path verifies with the key it reads.
		return false, g, nil
	}
	done, err = fold(w, &post{r: r, url: url, payload: g.payload}, store.SignedUse{Nonce: use, AccountID: acctID, KeyJWK: []byte(g.jwk)})
	if done && !isBadNonce(err) {
		s.metrics.redeemed.Inc()
	}
	return done, g, err
}

// orderFacts is what never changes about an order: enough to check a
// finalize's CSR before the transaction that claims the order.
type orderFacts struct {
	accountID   string
	profile     string
	identifiers []acme.Identifier
}

// rememberOrder keeps o's facts for a folded finalize (Server.orders).
func (s *Server) rememberOrder(o *store.Order) {
	s.orders.put(o.ID, orderFacts{accountID: o.AccountID, profile: o.Profile, identifiers: slices.Clone(o.Identifiers)})
}

// dbClock is the database's clock as this frontend last saw it: the time
// a nonce answer carried (store.NonceUsed), against this process's clock
// when the answer came. A folded newOrder computes its order's times from
// it, as the ordinary path does from the answer itself, and its
// transaction refuses an estimate more than store.ClockSlack off.
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

// isBadNonce reports whether err refuses the request's nonce.
func isBadNonce(err error) bool {
	var ae *acme.Error
	return errors.As(err, &ae) && ae.Problem.Type == acme.ProblemBadNonce
}
