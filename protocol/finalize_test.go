package protocol_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/goodkey/goodkeytest"
	"github.com/hallmark-ca/hallmark/store"
)

// TestFinalizeRefusesKey: a CSR whose key must not be certified is refused
// with badCSR at finalize, with a detail saying why, whatever the
// account's key type, and nothing is queued: the account's own key (as
// Boulder refuses it), and an RSA key anyone can factor from its public
// half (goodkey; before, the worker's lint refused the certificate later
// with serverInternal). On PostgreSQL the folded finalize refuses it
// before its transaction (no fold reaches the store), and the ordinary
// path answers; the order stays ready.
func TestFinalizeRefusesKey(t *testing.T) {
	t.Parallel()
	rsaAccount := func(t *testing.T) *account {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		return &account{key: k, alg: jose.RS256}
	}
	accountKey := func(_ *testing.T, a *account) crypto.Signer { return a.key }
	neighbours := func(t *testing.T, _ *account) crypto.Signer {
		k, err := goodkeytest.NeighbourPrimes(2048)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	const (
		sameKey = "the CSR's public key is the account key; the certificate's key must not be the account key: generate a new key for the certificate"
		unsafe  = "the CSR's key is unsafe to certify: the RSA modulus's two prime factors are so close together that they can be computed from it"
	)
	withFoldWatch(t, func(t *testing.T, e *env, watch *foldWatch, pg bool) {
		for _, tc := range []struct {
			name    string
			account func(t *testing.T) *account
			csrKey  func(t *testing.T, a *account) crypto.Signer
			detail  string // the problem's detail, or its start
		}{
			{"p256 account key", newKey, accountKey, sameKey},
			{"rsa account key", rsaAccount, accountKey, sameKey},
			{"rsa key with neighbouring primes", newKey, neighbours, unsafe},
		} {
			t.Run(tc.name, func(t *testing.T) {
				a := tc.account(t)
				r := e.post(t, a, e.base+"/acme/new-account", map[string]any{"termsOfServiceAgreed": true})
				wantStatus(t, r, http.StatusCreated)
				a.kid = r.header.Get("Location")
				names := []string{"refused-key.example"}
				o, loc := e.newOrder(t, a, dnsIDs(names...)) // the frontend learns the key: the next finalize may fold
				e.validate(t, a, o)
				jobs := e.jobCount(t, "signer_issue")
				watch.reset()
				r = e.post(t, a, o.Finalize, map[string]any{"csr": b64(csrFor(t, tc.csrKey(t, a), names...))})
				p := wantProblem(t, e, r, acme.ProblemBadCSR, http.StatusBadRequest)
				if !strings.HasPrefix(p.Detail, tc.detail) || p.Identifier != nil || len(p.Subproblems) != 0 {
					t.Errorf("problem = %+v, want badCSR with detail %q", p, tc.detail)
				}
				watch.wantUnfolded(t, false)
				if n := e.jobCount(t, "signer_issue") - jobs; n != 0 {
					t.Errorf("%d signer_issue jobs queued", n)
				}
				if got := e.getOrder(t, a, loc); got.Status != acme.StatusReady {
					t.Errorf("the order is %s after the refusal, want ready", got.Status)
				}
			})
		}
	})
}

// expireOrder moves order id's expiry a minute into the past, straight in
// its table, as though housekeeping (store.ExpirePending) had not run
// since: the order is still stored as it was.
func (e *env) expireOrder(t *testing.T, id string) {
	t.Helper()
	e.expire(t, "orders", id)
}

// expire moves the expiry of table's row id (orders or authorizations) a
// minute into the past, as the database stores it, with its status left
// as it was: what a client meets before housekeeping has run.
func (e *env) expire(t *testing.T, table, id string) {
	t.Helper()
	var at any = time.Now().Add(-time.Minute)
	if e.kind != "postgres" {
		at = at.(time.Time).UnixMicro() // SQLite stores microseconds
	}
	e.exec(t, "UPDATE "+table+" SET expires_at = $1 WHERE id = $2", at, id)
}

// expiringFinalize is a real store that, while armed, expires the order
// just before finalize's compare-and-swap: the order was ready and
// unexpired when the request read it, and the swap loses to its expiry.
// Armed, a claim at once (with its nonce) loses without trying, so that
// the ordinary path, which reads first, is the one that meets the expiry.
type expiringFinalize struct {
	store.Store
	armed  func() bool
	expire func(id string)
}

func (x *expiringFinalize) OrderFinalizeBegin(ctx context.Context, u store.SignedUse, id, profile string, csr, keyHash []byte) (*store.Order, bool, error) {
	if u.Nonce.Nonce != "" {
		if x.armed() {
			return nil, false, nil // not at once: the request reads, then claims, and the expiry comes between
		}
		return x.Store.OrderFinalizeBegin(ctx, u, id, profile, csr, keyHash)
	}
	x.expire(id)
	return x.Store.OrderFinalizeBegin(ctx, u, id, profile, csr, keyHash)
}

// TestFinalizeExpiredOrder: an order past its expiry that housekeeping has
// not moved yet (still stored pending or ready) reads as invalid, with a
// problem saying when it expired (RFC 8555 §7.1.6), and its finalize is
// orderNotReady saying it expired, never that a ready order cannot be
// finalized. Nothing is queued. The same when the expiry comes between the
// request's read and finalize's compare-and-swap.
func TestFinalizeExpiredOrder(t *testing.T) {
	t.Parallel()
	var armed sync.Map // env URL → the env, while its next finalize is to expire the order first
	wrap := func(s store.Store) store.Store { return &expiringFinalize{Store: s} }
	withWrappedStores(t, nil, wrap, nil, func(t *testing.T, e *env) {
		x := e.st.(*expiringFinalize)
		x.armed = func() bool {
			_, ok := armed.Load(e.url)
			return ok
		}
		x.expire = func(id string) {
			if _, ok := armed.LoadAndDelete(e.url); ok {
				e.expireOrder(t, id)
			}
		}
		for _, tc := range []struct {
			name     string
			validate bool // the order is ready, not pending
			midway   bool // expired between the read and the swap, not before the request
		}{
			{"ready", true, false},
			{"pending", false, false},
			{"ready, expiring during finalize", true, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				a := e.register(t)
				names := []string{"expired-" + strings.ReplaceAll(strings.ReplaceAll(tc.name, " ", "-"), ",", "") + ".example"}
				o, loc := e.newOrder(t, a, dnsIDs(names...))
				if tc.validate {
					e.validate(t, a, o)
				}
				if tc.midway {
					armed.Store(e.url, true)
				} else {
					e.expireOrder(t, lastSegment(loc))
				}
				jobs := e.jobCount(t, "signer_issue")
				key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
				r := e.post(t, a, o.Finalize, map[string]any{"csr": b64(csrFor(t, key, names...))})
				p := wantProblem(t, e, r, acme.ProblemOrderNotReady, http.StatusForbidden)
				got := e.getOrder(t, a, loc)
				expired := acme.Problem{Type: acme.ProblemUnauthorized, Detail: "the order expired at " + got.Expires + " before it was finalized"}
				want := "the order is invalid and cannot be finalized: " + expired.Detail + "; create a new order"
				if p.Detail != want || p.Identifier != nil || len(p.Subproblems) != 0 {
					t.Errorf("problem = %+v\nwant detail %q", p, want)
				}
				if n := e.jobCount(t, "signer_issue") - jobs; n != 0 {
					t.Errorf("%d signer_issue jobs queued for an expired order", n)
				}
				if got.Status != acme.StatusInvalid || got.Error == nil || !reflect.DeepEqual(*got.Error, expired) {
					t.Errorf("the expired order reads %s with error %+v; want invalid with %+v", got.Status, got.Error, expired)
				}
			})
		}
	})
}
