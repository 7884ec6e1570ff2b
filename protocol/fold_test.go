package protocol_test

import (
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// foldWatch is the real store, counting how challenge POSTs reached it:
// folded with their nonce (ChallengeClaimSigned) or the ordinary way.
type foldWatch struct {
	store.Store
	mu                               sync.Mutex
	folded, unfolded, nonces, claims int
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

func (w *foldWatch) ChallengeClaimSigned(ctx context.Context, u store.SignedUse, id string) (*store.Challenge, error) {
	c, err := w.Store.ChallengeClaimSigned(ctx, u, id)
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err == nil:
		w.folded++
	case errors.Is(err, store.ErrUnfolded):
		w.unfolded++
	}
	return c, err
}

func (w *foldWatch) NonceConsume(ctx context.Context, uses []store.NonceUse) ([]store.NonceUsed, error) {
	w.mu.Lock()
	w.nonces += len(uses)
	w.mu.Unlock()
	return w.Store.NonceConsume(ctx, uses)
}

func (w *foldWatch) ChallengeClaim(ctx context.Context, id string) (*store.Challenge, bool, error) {
	w.mu.Lock()
	w.claims++
	w.mu.Unlock()
	return w.Store.ChallengeClaim(ctx, id)
}

// TestChallengeFolded: a challenge POST from an account whose key the
// frontend knows is one transaction with its nonce on PostgreSQL (no nonce
// batch, no claim of its own); on SQLite it goes the ordinary way. Every
// request the fold cannot vouch for commits nothing there and is answered
// as it always was: a replayed nonce, a key that changed since, another
// account's challenge, a challenge already claimed.
func TestChallengeFolded(t *testing.T) {
	t.Parallel()
	wrap := func(s store.Store) store.Store { return &foldWatch{Store: s} }
	withWrappedStores(t, nil, wrap, nil, func(t *testing.T, e *env) {
		watch := e.st.(*foldWatch)
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
		pg := e.kind == "postgres"

		t.Run("folded", func(t *testing.T) {
			a := e.register(t)
			chURL, authzURL := pending(t, a, "fold.example")
			jobs := e.jobCount(t, "challenge_validate")
			watch.reset()
			r := e.post(t, a, chURL, map[string]any{})
			folded, _, nonces, claims := watch.counts()
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
			if pg && (folded != 1 || nonces != 0 || claims != 0) {
				t.Errorf("postgres: folded %d, nonce uses %d, ordinary claims %d; want 1, 0, 0", folded, nonces, claims)
			}
			if !pg && (folded != 0 || nonces != 1 || claims != 1) {
				t.Errorf("sqlite: folded %d, nonce uses %d, ordinary claims %d; want 0, 1, 1", folded, nonces, claims)
			}
		})

		t.Run("replayed nonce", func(t *testing.T) {
			a := e.register(t)
			chURL, authzURL := pending(t, a, "fold-replay.example")
			n := e.nonce(t)
			wantStatus(t, e.post(t, a, authzURL, nil, signOpts{nonce: n}), http.StatusOK)
			jobs := e.jobCount(t, "challenge_validate")
			watch.reset()
			r := e.post(t, a, chURL, map[string]any{}, signOpts{nonce: n})
			folded, unfolded, _, _ := watch.counts()
			wantProblem(t, e, r, acme.ProblemBadNonce, http.StatusBadRequest)
			if pg && (folded != 0 || unfolded != 1) {
				t.Errorf("postgres: folded %d, unfolded %d; want 0 and 1", folded, unfolded)
			}
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
			folded, unfolded, _, _ := watch.counts()
			if r.status < 400 {
				t.Fatalf("a request signed with the replaced key was answered %d: %s", r.status, r.body)
			}
			if pg && (folded != 0 || unfolded != 1) {
				t.Errorf("postgres: folded %d, unfolded %d; want 0 and 1", folded, unfolded)
			}
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
			folded, unfolded, _, _ := watch.counts()
			wantProblem(t, e, r, acme.ProblemUnauthorized, http.StatusForbidden)
			if pg && (folded != 0 || unfolded != 1) {
				t.Errorf("postgres: folded %d, unfolded %d; want 0 and 1", folded, unfolded)
			}
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
			folded, unfolded, _, claims := watch.counts()
			wantStatus(t, r, http.StatusOK)
			var c challJSON
			r.json(t, &c)
			if c.Status != acme.StatusProcessing {
				t.Errorf("a repeated POST answered %s, want processing", c.Status)
			}
			if folded != 0 || claims != 0 || (pg && unfolded != 1) {
				t.Errorf("folded %d, unfolded %d, ordinary claims %d; want 0, %d, 0 (the ordinary path reads it)", folded, unfolded, claims, b2i(pg))
			}
			if n := e.jobCount(t, "challenge_validate") - jobs; n != 0 {
				t.Errorf("a repeated POST queued %d jobs", n)
			}
		})
	})
}
