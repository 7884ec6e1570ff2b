package protocol_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// foldWatch is the real store, counting how newOrders, challenge POSTs
// and finalizes reached it: claimed at once with their nonce (folded: won;
// unfolded: committed nothing) or the ordinary way, after a nonce batch.
type foldWatch struct {
	store.Store
	mu                               sync.Mutex
	folded, unfolded, nonces, claims int
}

func (w *foldWatch) OrderFinalizeBegin(ctx context.Context, u store.SignedUse, id, profile string, csr, keyHash []byte) (*store.Order, bool, error) {
	o, won, err := w.Store.OrderFinalizeBegin(ctx, u, id, profile, csr, keyHash)
	w.count(u, won, err)
	return o, won, err
}

func (w *foldWatch) OrderCreate(ctx context.Context, u store.SignedUse, o store.NewOrder) (*store.Order, error) {
	out, err := w.Store.OrderCreate(ctx, u, o)
	w.count(u, err == nil, err)
	return out, err
}

func (w *foldWatch) ChallengeClaim(ctx context.Context, u store.SignedUse, id string) (*store.Challenge, bool, error) {
	c, won, err := w.Store.ChallengeClaim(ctx, u, id)
	w.count(u, won, err)
	return c, won, err
}

// withFoldWatch runs f on both stores, each wrapped in a foldWatch; both
// claim at once (atOnce).
func withFoldWatch(t *testing.T, f func(t *testing.T, e *env, watch *foldWatch, atOnce bool)) {
	t.Helper()
	wrap := func(s store.Store) store.Store { return &foldWatch{Store: s} }
	withWrappedStores(t, nil, wrap, nil, func(t *testing.T, e *env) {
		f(t, e, e.st.(*foldWatch), true)
	})
}

// count records a claim's outcome: with its nonce, won (folded) or not
// (unfolded, nothing committed); without, an ordinary claim.
func (w *foldWatch) count(u store.SignedUse, won bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case u.Nonce.Nonce == "":
		w.claims++
	case won:
		w.folded++
	case err == nil || errors.Is(err, store.ErrNotClaimed):
		w.unfolded++
	}
}

func (w *foldWatch) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.folded, w.unfolded, w.nonces, w.claims = 0, 0, 0, 0
}

func (w *foldWatch) counts() (folded, unfolded, nonces, claims int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.folded, w.unfolded, w.nonces, w.claims
}

// wantFolded checks how the one write since reset reached the store:
// claimed at once (no nonce batch, no ordinary claim) when atOnce, else
// the ordinary way without a claim at once tried first.
func (w *foldWatch) wantFolded(t *testing.T, atOnce bool) {
	t.Helper()
	folded, unfolded, nonces, claims := w.counts()
	want := [4]int{0, 0, 1, 1}
	if atOnce {
		want = [4]int{1, 0, 0, 0}
	}
	if got := [4]int{folded, unfolded, nonces, claims}; got != want {
		t.Errorf("claimed at once %d, not %d, nonce uses %d, ordinary claims %d; want %v (at once %v)", got[0], got[1], got[2], got[3], want, atOnce)
	}
}

// wantUnfolded checks that the one write since reset committed no claim
// at once: it was tried and did not apply when tried is set, and was not
// tried at all otherwise.
func (w *foldWatch) wantUnfolded(t *testing.T, tried bool) {
	t.Helper()
	folded, unfolded, _, _ := w.counts()
	if folded != 0 || unfolded != b2i(tried) {
		t.Errorf("claimed at once %d, not %d; want 0 and %d", folded, unfolded, b2i(tried))
	}
}

func (w *foldWatch) NonceConsume(ctx context.Context, uses []store.NonceUse) ([]store.NonceUsed, error) {
	w.mu.Lock()
	w.nonces += len(uses)
	w.mu.Unlock()
	return w.Store.NonceConsume(ctx, uses)
}

// TestChallengeFolded: a challenge POST from an account whose key the
// frontend knows is one transaction with its nonce on PostgreSQL (no nonce
// batch, no claim of its own); on SQLite it goes the ordinary way. Every
// request the fold cannot vouch for commits nothing there and is answered
// as it always was: a replayed nonce, a key that changed since, another
// account's challenge, a challenge already claimed.
func TestChallengeFolded(t *testing.T) {
	t.Parallel()
	withFoldWatch(t, func(t *testing.T, e *env, watch *foldWatch, atOnce bool) {
		// A challenge of a's, pending, after requests that taught the
		// frontend a's key.
		pending := func(t *testing.T, a *account, name string) (chURL, authzURL string) {
			t.Helper()
			o, _ := e.newOrder(t, a, dnsIDs(name))
			az := e.authz(t, a, o.Authorizations[0])
			return az.Challenges[0].URL, o.Authorizations[0]
		}
		challengeStatus := func(t *testing.T, a *account, authzURL, chURL string) acme.Status {
			t.Helper()
			for _, c := range e.authz(t, a, authzURL).Challenges {
				if c.URL == chURL {
					return c.Status
				}
			}
			t.Fatalf("no challenge %s in %s", chURL, authzURL)
			return ""
		}

		t.Run("folded", func(t *testing.T) {
			a := e.register(t)
			chURL, authzURL := pending(t, a, "fold.example")
			jobs := e.jobCount(t, "challenge_validate")
			watch.reset()
			r := e.post(t, a, chURL, map[string]any{})
			wantStatus(t, r, http.StatusOK)
			var c challJSON
			r.json(t, &c)
			if c.Status != acme.StatusProcessing || r.header.Get("Retry-After") == "" {
				t.Errorf("answer: status %s, Retry-After %q; want processing with a Retry-After", c.Status, r.header.Get("Retry-After"))
			}
			if up := r.links("up"); len(up) != 1 || up[0] != authzURL {
				t.Errorf(`Link rel="up" = %v, want [%s]`, up, authzURL)
			}
			if n := e.jobCount(t, "challenge_validate") - jobs; n != 1 {
				t.Errorf("%d challenge_validate jobs queued, want 1", n)
			}
			watch.wantFolded(t, atOnce)
		})

		t.Run("replayed nonce", func(t *testing.T) {
			a := e.register(t)
			chURL, authzURL := pending(t, a, "fold-replay.example")
			n := e.nonce(t)
			wantStatus(t, e.post(t, a, authzURL, nil, signOpts{nonce: n}), http.StatusOK)
			jobs := e.jobCount(t, "challenge_validate")
			watch.reset()
			r := e.post(t, a, chURL, map[string]any{}, signOpts{nonce: n})
			wantProblem(t, e, r, acme.ProblemBadNonce, http.StatusBadRequest)
			watch.wantUnfolded(t, atOnce)
			if s := challengeStatus(t, a, authzURL, chURL); s != acme.StatusPending {
				t.Errorf("the challenge is %s after a replayed nonce, want pending", s)
			}
			if n := e.jobCount(t, "challenge_validate") - jobs; n != 0 {
				t.Errorf("%d jobs queued by a replayed nonce", n)
			}
		})

		t.Run("key changed since", func(t *testing.T) {
			// The account's key is swapped in the store behind the
			// frontend's back, as another frontend's key change would:
			// the frontend still knows the old key, and the request is
			// signed with it. It verifies with what the frontend knows;
			// only the transaction's account check can refuse it.
			a := e.register(t)
			chURL, authzURL := pending(t, a, "fold-rollover.example")
			fresh := newKey(t)
			jwk, err := json.Marshal(jose.JSONWebKey{Key: fresh.key.Public()})
			if err != nil {
				t.Fatal(err)
			}
			thumb, err := (&jose.JSONWebKey{Key: fresh.key.Public()}).Thumbprint(crypto.SHA256)
			if err != nil {
				t.Fatal(err)
			}
			oldJWK, err := json.Marshal(jose.JSONWebKey{Key: a.key.Public()})
			if err != nil {
				t.Fatal(err)
			}
			old, err := e.st.AccountByID(context.Background(), lastSegment(a.kid))
			if err != nil {
				t.Fatal(err)
			}
			if string(old.KeyJWK) != string(oldJWK) {
				t.Fatalf("the stored key %s is not the client's %s", old.KeyJWK, oldJWK)
			}
			if _, err := e.st.AccountKeyChange(context.Background(), old.ID, old.Thumbprint, jwk, base64.RawURLEncoding.EncodeToString(thumb)); err != nil {
				t.Fatal(err)
			}
			jobs := e.jobCount(t, "challenge_validate")
			watch.reset()
			r := e.post(t, a, chURL, map[string]any{})
			if r.status < 400 {
				t.Fatalf("a request signed with the replaced key was answered %d: %s", r.status, r.body)
			}
			watch.wantUnfolded(t, atOnce)
			a.key = fresh.key
			if s := challengeStatus(t, a, authzURL, chURL); s != acme.StatusPending {
				t.Errorf("the challenge is %s after a request signed with the replaced key, want pending", s)
			}
			if n := e.jobCount(t, "challenge_validate") - jobs; n != 0 {
				t.Errorf("%d jobs queued by a request signed with the replaced key", n)
			}
		})

		t.Run("another account's challenge", func(t *testing.T) {
			owner, other := e.register(t), e.register(t)
			chURL, authzURL := pending(t, owner, "fold-owner.example")
			pending(t, other, "fold-other.example") // the frontend learns other's key
			watch.reset()
			r := e.post(t, other, chURL, map[string]any{})
			wantProblem(t, e, r, acme.ProblemUnauthorized, http.StatusForbidden)
			watch.wantUnfolded(t, atOnce)
			if s := challengeStatus(t, owner, authzURL, chURL); s != acme.StatusPending {
				t.Errorf("the owner's challenge is %s after another account's POST, want pending", s)
			}
		})

		t.Run("answered again", func(t *testing.T) {
			a := e.register(t)
			chURL, _ := pending(t, a, "fold-again.example")
			wantStatus(t, e.post(t, a, chURL, map[string]any{}), http.StatusOK)
			jobs := e.jobCount(t, "challenge_validate")
			watch.reset()
			r := e.post(t, a, chURL, map[string]any{})
			_, _, _, claims := watch.counts()
			wantStatus(t, r, http.StatusOK)
			var c challJSON
			r.json(t, &c)
			if c.Status != acme.StatusProcessing {
				t.Errorf("a repeated POST answered %s, want processing", c.Status)
			}
			watch.wantUnfolded(t, atOnce)
			if claims != 0 {
				t.Errorf("%d ordinary claims, want none (the ordinary path reads it)", claims)
			}
			if n := e.jobCount(t, "challenge_validate") - jobs; n != 0 {
				t.Errorf("a repeated POST queued %d jobs", n)
			}
		})
	})
}

// TestFinalizeFolded: a finalize of an order this frontend has seen, from
// an account whose key it knows, is one transaction with its nonce on
// PostgreSQL; on SQLite it goes the ordinary way. What the fold cannot
// vouch for is answered as it always was, and leaves the order ready.
func TestFinalizeFolded(t *testing.T) {
	t.Parallel()
	withFoldWatch(t, func(t *testing.T, e *env, watch *foldWatch, atOnce bool) {
		ready := func(t *testing.T, a *account, name string) (orderJSON, string) {
			t.Helper()
			o, loc := e.newOrder(t, a, dnsIDs(name))
			e.validate(t, a, o)
			return o, loc
		}
		csrOf := func(t *testing.T, names ...string) map[string]any {
			t.Helper()
			k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			return map[string]any{"csr": b64(csrFor(t, k, names...))}
		}
		stillReady := func(t *testing.T, a *account, loc string, jobs int) {
			t.Helper()
			if o := e.getOrder(t, a, loc); o.Status != acme.StatusReady {
				t.Errorf("the order is %s, want ready", o.Status)
			}
			if n := e.jobCount(t, "signer_issue") - jobs; n != 0 {
				t.Errorf("%d signer_issue jobs queued", n)
			}
		}

		t.Run("folded", func(t *testing.T) {
			a := e.register(t)
			o, _ := ready(t, a, "fin-fold.example")
			jobs := e.jobCount(t, "signer_issue")
			watch.reset()
			r := e.post(t, a, o.Finalize, csrOf(t, "fin-fold.example"))
			wantStatus(t, r, http.StatusOK)
			var got orderJSON
			r.json(t, &got)
			if got.Status != acme.StatusProcessing || r.header.Get("Retry-After") == "" {
				t.Errorf("answer: status %s, Retry-After %q; want processing with a Retry-After", got.Status, r.header.Get("Retry-After"))
			}
			if n := e.jobCount(t, "signer_issue") - jobs; n != 1 {
				t.Errorf("%d signer_issue jobs queued, want 1", n)
			}
			watch.wantFolded(t, atOnce)
		})

		// Each refused the ordinary way, with the order left ready.
		for _, tc := range []struct {
			name       string
			setup      func(t *testing.T, a *account, o orderJSON) (*account, any, signOpts)
			wantType   acme.ProblemType
			wantStatus int
			wantTried  bool // the fold reached the store (and committed nothing)
		}{
			{"a CSR for other names", func(t *testing.T, a *account, o orderJSON) (*account, any, signOpts) {
				return a, csrOf(t, "someone-else.example"), signOpts{}
			}, acme.ProblemBadCSR, http.StatusBadRequest, false},
			{"a replayed nonce", func(t *testing.T, a *account, o orderJSON) (*account, any, signOpts) {
				n := e.nonce(t)
				wantStatus(t, e.post(t, a, o.Authorizations[0], nil, signOpts{nonce: n}), http.StatusOK)
				return a, csrOf(t, o.Identifiers[0].Value), signOpts{nonce: n}
			}, acme.ProblemBadNonce, http.StatusBadRequest, true},
			{"another account's order", func(t *testing.T, a *account, o orderJSON) (*account, any, signOpts) {
				other := e.register(t)
				e.newOrder(t, other, dnsIDs("fin-other.example")) // the frontend learns other's key
				return other, csrOf(t, o.Identifiers[0].Value), signOpts{}
			}, acme.ProblemUnauthorized, http.StatusForbidden, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				a := e.register(t)
				o, loc := ready(t, a, "fin-"+strings.ReplaceAll(strings.ReplaceAll(tc.name, " ", "-"), "'", "")+".example")
				jobs := e.jobCount(t, "signer_issue")
				signer, payload, opts := tc.setup(t, a, o)
				watch.reset()
				r := e.post(t, signer, o.Finalize, payload, opts)
				wantProblem(t, e, r, tc.wantType, tc.wantStatus)
				watch.wantUnfolded(t, atOnce && tc.wantTried)
				stillReady(t, a, loc, jobs)
			})
		}

		t.Run("finalized before", func(t *testing.T) {
			a := e.register(t)
			o, _ := ready(t, a, "fin-again.example")
			wantStatus(t, e.post(t, a, o.Finalize, csrOf(t, "fin-again.example")), http.StatusOK)
			jobs := e.jobCount(t, "signer_issue")
			watch.reset()
			r := e.post(t, a, o.Finalize, csrOf(t, "fin-again.example"))
			wantProblem(t, e, r, acme.ProblemOrderNotReady, http.StatusForbidden)
			watch.wantUnfolded(t, atOnce)
			if n := e.jobCount(t, "signer_issue") - jobs; n != 0 {
				t.Errorf("a second finalize queued %d jobs", n)
			}
		})
	})
}

// TestNewOrderFolded: a newOrder from an account whose key the frontend
// knows, that it knows has no external account binding and whose last
// ordinary newOrder found nothing to reuse, is one transaction with its
// nonce on PostgreSQL; on SQLite it goes the ordinary way. An
// authorization to reuse sends it the ordinary way, which reuses it, and
// keeps the account's next newOrder off the fold; what the fold cannot
// vouch for is answered as it always was, with no order written.
func TestNewOrderFolded(t *testing.T) {
	t.Parallel()
	withFoldWatch(t, func(t *testing.T, e *env, watch *foldWatch, atOnce bool) {
		newOrderURL := e.base + "/acme/new-order"
		orderCount := func(t *testing.T, a *account) int {
			t.Helper()
			ids, _, err := e.st.OrdersByAccount(context.Background(), lastSegment(a.kid), store.Page{})
			if err != nil {
				t.Fatal(err)
			}
			return len(ids)
		}
		// known is an account after one ordinary newOrder, which taught
		// the frontend its key, that it has no binding and nothing to
		// reuse.
		known := func(t *testing.T, name string) (a *account, orderURL string) {
			t.Helper()
			a = e.register(t)
			watch.reset()
			_, orderURL = e.newOrder(t, a, dnsIDs(name))
			watch.wantUnfolded(t, false)
			return a, orderURL
		}

		t.Run("folded", func(t *testing.T) {
			a, _ := known(t, "nof-first.example")
			watch.reset()
			o, loc := e.newOrder(t, a, dnsIDs("nof.example", "*.nof.example"))
			watch.wantFolded(t, atOnce)
			if o.Status != acme.StatusPending || len(o.Authorizations) != 2 || loc == "" {
				t.Fatalf("the folded order is %s with %d authorizations at %q; want pending with 2 at a Location", o.Status, len(o.Authorizations), loc)
			}
			if got := e.getOrder(t, a, loc); got.Status != acme.StatusPending || !slices.Equal(got.Authorizations, o.Authorizations) {
				t.Errorf("the order reads back %s with %v, want pending with %v", got.Status, got.Authorizations, o.Authorizations)
			}
			az := e.authz(t, a, o.Authorizations[1])
			if az.Identifier.Value != "nof.example" || !az.Wildcard || az.Status != acme.StatusPending || len(az.Challenges) == 0 {
				t.Errorf("the second authorization is %+v, want a pending wildcard for nof.example with challenges", az)
			}
			// It can be validated and finalized like any other.
			e.validate(t, a, o)
			if got := e.getOrder(t, a, loc); got.Status != acme.StatusReady {
				t.Errorf("the folded order is %s after its authorizations were validated, want ready", got.Status)
			}
		})

		t.Run("the first order of an account", func(t *testing.T) {
			a := e.register(t)
			watch.reset()
			e.newOrder(t, a, dnsIDs("nof-new.example"))
			watch.wantUnfolded(t, false)
		})

		t.Run("an authorization to reuse", func(t *testing.T) {
			a, _ := known(t, "nof-reuse-first.example")
			first, _ := e.newOrder(t, a, dnsIDs("nof-reuse.example"))
			e.validate(t, a, first)
			watch.reset()
			o, _ := e.newOrder(t, a, dnsIDs("nof-reuse.example"))
			watch.wantUnfolded(t, atOnce) // tried, and the store refused it
			if o.Status != acme.StatusReady || len(o.Authorizations) != 1 || o.Authorizations[0] != first.Authorizations[0] {
				t.Errorf("the order is %s with %v; want ready, reusing %v", o.Status, o.Authorizations, first.Authorizations)
			}
			// That newOrder found one to reuse: the next is not tried.
			watch.reset()
			e.newOrder(t, a, dnsIDs("nof-reuse-next.example"))
			watch.wantUnfolded(t, false)
			// That one found none: the next is folded again.
			watch.reset()
			e.newOrder(t, a, dnsIDs("nof-reuse-last.example"))
			watch.wantFolded(t, atOnce)
		})

		t.Run("a replayed nonce", func(t *testing.T) {
			a, orderURL := known(t, "nof-replay-first.example")
			n := e.nonce(t)
			wantStatus(t, e.post(t, a, orderURL, nil, signOpts{nonce: n}), http.StatusOK)
			before := orderCount(t, a)
			watch.reset()
			r := e.post(t, a, newOrderURL, map[string]any{"identifiers": dnsIDs("nof-replay.example")}, signOpts{nonce: n})
			wantProblem(t, e, r, acme.ProblemBadNonce, http.StatusBadRequest)
			watch.wantUnfolded(t, atOnce)
			if got := orderCount(t, a) - before; got != 0 {
				t.Errorf("%d orders written with a replayed nonce", got)
			}
		})

		t.Run("a payload it refuses", func(t *testing.T) {
			a, _ := known(t, "nof-refused-first.example")
			before := orderCount(t, a)
			watch.reset()
			r := e.post(t, a, newOrderURL, map[string]any{"identifiers": []acme.Identifier{}})
			wantProblem(t, e, r, acme.ProblemMalformed, http.StatusBadRequest)
			watch.wantUnfolded(t, false)
			if got := orderCount(t, a) - before; got != 0 {
				t.Errorf("%d orders written for a refused payload", got)
			}
		})
	})
}
