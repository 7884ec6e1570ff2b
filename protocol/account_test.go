package protocol_test

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/goodkey/goodkeytest"
)

type accountJSON struct {
	Status               acme.Status `json:"status"`
	Contact              []string    `json:"contact"`
	TermsOfServiceAgreed bool        `json:"termsOfServiceAgreed"`
	Orders               string      `json:"orders"`
}

func TestNewAccount(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		url := e.base + "/acme/new-account"
		a := newKey(t)
		r := e.post(t, a, url, map[string]any{"termsOfServiceAgreed": true, "contact": []string{"mailto:admin@hallmark.example"}})
		wantStatus(t, r, http.StatusCreated)
		loc := r.header.Get("Location")
		var acct accountJSON
		r.json(t, &acct)
		if acct.Status != acme.StatusValid || acct.Orders != loc+"/orders" || len(acct.Contact) != 1 || !acct.TermsOfServiceAgreed {
			t.Errorf("account = %+v (Location %s)", acct, loc)
		}
		if r.header.Get("Replay-Nonce") == "" || len(r.links("index")) != 1 {
			t.Errorf("new-account response lacks Replay-Nonce or Link index: %v", r.header)
		}

		// The same key again: 200 and the same account (RFC 8555 §7.3.1).
		r = e.post(t, a, url, map[string]any{"termsOfServiceAgreed": true})
		wantStatus(t, r, http.StatusOK)
		if got := r.header.Get("Location"); got != loc {
			t.Errorf("existing account Location = %q, want %q", got, loc)
		}
		r = e.post(t, a, url, map[string]any{"onlyReturnExisting": true})
		wantStatus(t, r, http.StatusOK)
		if got := r.header.Get("Location"); got != loc {
			t.Errorf("onlyReturnExisting Location = %q, want %q", got, loc)
		}

		cases := []struct {
			name    string
			payload any
			typ     acme.ProblemType
			status  int
		}{
			{"onlyReturnExisting unknown key", map[string]any{"onlyReturnExisting": true}, acme.ProblemAccountDoesNotExist, 400},
			{"terms not agreed", map[string]any{"contact": []string{"mailto:a@hallmark.example"}}, acme.ProblemMalformed, 400},
			{"tel contact", map[string]any{"termsOfServiceAgreed": true, "contact": []string{"tel:+15555550100"}}, acme.ProblemUnsupportedContact, 400},
			{"hfields", map[string]any{"termsOfServiceAgreed": true, "contact": []string{"mailto:a@hallmark.example?subject=hi"}}, acme.ProblemInvalidContact, 400},
			{"two addresses", map[string]any{"termsOfServiceAgreed": true, "contact": []string{"mailto:a@hallmark.example,b@hallmark.example"}}, acme.ProblemInvalidContact, 400},
			{"not an address", map[string]any{"termsOfServiceAgreed": true, "contact": []string{"mailto:nobody"}}, acme.ProblemInvalidContact, 400},
			{"display name", map[string]any{"termsOfServiceAgreed": true, "contact": []string{"mailto:Bob <b@hallmark.example>"}}, acme.ProblemInvalidContact, 400},
			// Domains as Let's Encrypt takes them: ASCII, valid A-labels.
			{"non-ASCII domain", map[string]any{"termsOfServiceAgreed": true, "contact": []string{"mailto:a@bücher.example"}}, acme.ProblemInvalidContact, 400},
			{"invalid A-label", map[string]any{"termsOfServiceAgreed": true, "contact": []string{"mailto:a@xn--a.example"}}, acme.ProblemInvalidContact, 400},
			{"underscore in the domain", map[string]any{"termsOfServiceAgreed": true, "contact": []string{"mailto:a@mail_host.example"}}, acme.ProblemInvalidContact, 400},
			{"wildcard domain", map[string]any{"termsOfServiceAgreed": true, "contact": []string{"mailto:a@*.example.com"}}, acme.ProblemInvalidContact, 400},
			{"single-label domain", map[string]any{"termsOfServiceAgreed": true, "contact": []string{"mailto:a@localhost"}}, acme.ProblemInvalidContact, 400},
			{"payload not an object", []byte(`["x"]`), acme.ProblemMalformed, 400},
			{"payload not JSON", []byte(`{"contact":`), acme.ProblemMalformed, 400},
			// Members named twice, which encoding/json would read as the last.
			{"a member twice", []byte(`{"termsOfServiceAgreed":true,"contact":["mailto:a@hallmark.example"],"contact":["mailto:b@hallmark.example"]}`), acme.ProblemMalformed, 400},
			{"a member twice but for case", []byte(`{"termsOfServiceAgreed":false,"TermsOfServiceAgreed":true}`), acme.ProblemMalformed, 400},
			{"a member twice in the binding", []byte(`{"termsOfServiceAgreed":true,"externalAccountBinding":{"protected":"e30","payload":"","signature":"AA","signature":"AB"}}`), acme.ProblemMalformed, 400},
		}
		for _, c := range cases {
			r := e.post(t, newKey(t), url, c.payload)
			t.Run(c.name, func(t *testing.T) { wantProblem(t, e, r, c.typ, c.status) })
		}
		// A non-ASCII domain's refusal says how to write it; so written,
		// the contact is accepted and kept as sent.
		r = e.post(t, newKey(t), url, map[string]any{"termsOfServiceAgreed": true, "contact": []string{"mailto:a@Bücher.example"}})
		if p := wantProblem(t, e, r, acme.ProblemInvalidContact, 400); !strings.Contains(p.Detail, `write it as "mailto:a@xn--bcher-kva.example"`) {
			t.Errorf("non-ASCII domain: detail %q does not give the A-label form", p.Detail)
		}
		r = e.post(t, newKey(t), url, map[string]any{"termsOfServiceAgreed": true, "contact": []string{"mailto:a@xn--bcher-kva.example"}})
		wantStatus(t, r, http.StatusCreated)
		var idn accountJSON
		r.json(t, &idn)
		if len(idn.Contact) != 1 || idn.Contact[0] != "mailto:a@xn--bcher-kva.example" {
			t.Errorf("A-label contact stored as %v", idn.Contact)
		}

		// newAccount must be signed with jwk, not kid.
		r = e.post(t, &account{key: a.key, alg: a.alg, kid: loc}, url, map[string]any{"termsOfServiceAgreed": true})
		wantProblem(t, e, r, acme.ProblemMalformed, 400)
	})
}

func TestAccountUpdateAndDeactivate(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		a := e.register(t)
		b := e.register(t)

		r := e.post(t, a, a.kid, nil)
		wantStatus(t, r, http.StatusOK)
		var acct accountJSON
		r.json(t, &acct)
		if acct.Status != acme.StatusValid {
			t.Errorf("status = %s", acct.Status)
		}

		r = e.post(t, a, a.kid, map[string]any{"contact": []string{"mailto:new@hallmark.example"}})
		wantStatus(t, r, http.StatusOK)
		r.json(t, &acct)
		if len(acct.Contact) != 1 || acct.Contact[0] != "mailto:new@hallmark.example" {
			t.Errorf("contact after update = %v", acct.Contact)
		}
		r = e.post(t, a, a.kid, map[string]any{"contact": []string{"ftp://x"}})
		wantProblem(t, e, r, acme.ProblemUnsupportedContact, 400)
		r = e.post(t, a, a.kid, map[string]any{"status": "valid"})
		wantProblem(t, e, r, acme.ProblemMalformed, 400)

		// b's key, a's account URL.
		r = e.post(t, b, a.kid, map[string]any{"contact": []string{}})
		wantProblem(t, e, r, acme.ProblemUnauthorized, 403)

		// A kid that names no account.
		r = e.post(t, a, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs("x.example")}, signOpts{kid: e.base + "/acme/acct/999999999"})
		wantProblem(t, e, r, acme.ProblemAccountDoesNotExist, 400)
		r = e.post(t, a, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs("x.example")}, signOpts{kid: "https://elsewhere.example/acct/1"})
		wantProblem(t, e, r, acme.ProblemAccountDoesNotExist, 400)
		// kid endpoints refuse jwk.
		r = e.post(t, a, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs("x.example")}, signOpts{useJWK: true})
		wantProblem(t, e, r, acme.ProblemMalformed, 400)

		r = e.post(t, a, a.kid, map[string]any{"status": "deactivated"})
		wantStatus(t, r, http.StatusOK)
		r.json(t, &acct)
		if acct.Status != acme.StatusDeactivated {
			t.Errorf("status after deactivate = %s", acct.Status)
		}
		// RFC 8555 §7.3.6: the deactivated account's key is refused with
		// 401, whatever it asks for.
		r = e.post(t, a, a.kid, nil)
		wantProblem(t, e, r, acme.ProblemUnauthorized, 401)
		r = e.post(t, a, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs("x.example")})
		wantProblem(t, e, r, acme.ProblemUnauthorized, 401)
		r = e.post(t, &account{key: a.key, alg: a.alg}, e.base+"/acme/new-account", map[string]any{"onlyReturnExisting": true})
		wantProblem(t, e, r, acme.ProblemUnauthorized, 401)
	})
}

func TestAccountOrdersList(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		a := e.register(t)
		b := e.register(t)
		var urls []string
		for _, n := range []string{"one.example", "two.example", "three.example"} {
			_, u := e.newOrder(t, a, dnsIDs(n))
			urls = append(urls, u)
		}
		r := e.post(t, a, a.kid+"/orders", nil)
		wantStatus(t, r, http.StatusOK)
		var list struct{ Orders []string }
		r.json(t, &list)
		got := map[string]bool{}
		for _, u := range list.Orders {
			got[u] = true
		}
		for _, u := range urls {
			if !got[u] {
				t.Errorf("orders list %v lacks %s", list.Orders, u)
			}
		}
		if next := r.links("next"); len(next) != 0 {
			t.Errorf("a short list has Link next %v", next)
		}
		r = e.post(t, b, a.kid+"/orders", nil)
		wantProblem(t, e, r, acme.ProblemUnauthorized, 403)
		r = e.post(t, a, a.kid+"/orders", map[string]any{})
		wantProblem(t, e, r, acme.ProblemMalformed, 400)
	})
}

func TestAccountOrdersPagination(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		a := e.register(t)
		const n = 103
		for i := 0; i < n; i++ {
			e.newOrder(t, a, dnsIDs("page.example"))
		}
		seen := map[string]bool{}
		url, pages := a.kid+"/orders", 0
		for url != "" {
			r := e.post(t, a, url, nil)
			wantStatus(t, r, http.StatusOK)
			var list struct{ Orders []string }
			r.json(t, &list)
			for _, u := range list.Orders {
				if seen[u] {
					t.Fatalf("order %s on two pages", u)
				}
				seen[u] = true
			}
			pages++
			url = ""
			if next := r.links("next"); len(next) == 1 {
				url = next[0]
			}
		}
		if len(seen) != n || pages < 2 {
			t.Errorf("saw %d orders on %d pages, want %d on 2 or more", len(seen), pages, n)
		}
		// A cursor the server did not hand out is the client's mistake.
		for _, c := range []string{"garbage", "-1", "%00"} {
			wantProblem(t, e, e.post(t, a, a.kid+"/orders?cursor="+c, nil), acme.ProblemMalformed, http.StatusBadRequest)
		}
	})
}

// unsafeAccount is an account key anyone can factor from its public half:
// RSA-2048 whose primes are neighbours (goodkeytest).
func unsafeAccount(t *testing.T) *account {
	t.Helper()
	k, err := goodkeytest.NeighbourPrimes(2048)
	if err != nil {
		t.Fatal(err)
	}
	return &account{key: k, alg: jose.RS256}
}

// TestNewAccountRefusesUnsafeKey: newAccount with a key anyone can factor
// is badPublicKey, saying why, and makes no account; the same request with
// a sound key of the same kind succeeds.
func TestNewAccountRefusesUnsafeKey(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		a := unsafeAccount(t)
		r := e.post(t, a, e.base+"/acme/new-account", map[string]any{"termsOfServiceAgreed": true})
		p := wantProblem(t, e, r, acme.ProblemBadPublicKey, http.StatusBadRequest)
		if want := "this account key is unsafe: the RSA modulus's two prime factors are so close together"; !strings.HasPrefix(p.Detail, want) {
			t.Errorf("detail %q, want it to start %q", p.Detail, want)
		}
		r = e.post(t, a, e.base+"/acme/new-account", map[string]any{"onlyReturnExisting": true})
		wantProblem(t, e, r, acme.ProblemAccountDoesNotExist, http.StatusBadRequest)
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		r = e.post(t, &account{key: k, alg: jose.RS256}, e.base+"/acme/new-account", map[string]any{"termsOfServiceAgreed": true})
		wantStatus(t, r, http.StatusCreated)
	})
}

func TestKeyChange(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		url := e.base + "/acme/key-change"
		a := e.register(t)
		other := e.register(t)
		pub := func(k *account) jose.JSONWebKey { return jose.JSONWebKey{Key: k.key.Public()} }
		inner := func(newKey *account, payload map[string]any, innerURL string) []byte {
			raw, _ := json.Marshal(payload)
			signer, err := jose.NewSigner(jose.SigningKey{Algorithm: newKey.alg, Key: newKey.joseKey()},
				&jose.SignerOptions{EmbedJWK: true, ExtraHeaders: map[jose.HeaderKey]any{"url": innerURL}})
			if err != nil {
				t.Fatal(err)
			}
			sig, err := signer.Sign(raw)
			if err != nil {
				t.Fatal(err)
			}
			return []byte(sig.FullSerialize())
		}
		next := newKey(t)

		// Hostile variants first.
		r := e.post(t, a, url, inner(next, map[string]any{"account": a.kid, "oldKey": pub(a)}, e.base+"/acme/new-order"))
		wantProblem(t, e, r, acme.ProblemMalformed, 400)
		r = e.post(t, a, url, inner(next, map[string]any{"account": other.kid, "oldKey": pub(a)}, url))
		wantProblem(t, e, r, acme.ProblemUnauthorized, 403)
		r = e.post(t, a, url, inner(next, map[string]any{"account": a.kid, "oldKey": pub(other)}, url))
		if p := wantProblem(t, e, r, acme.ProblemUnauthorized, 403); !strings.Contains(p.Detail, "oldKey is not the account's current key") {
			t.Errorf("oldKey of another account: %q", p.Detail)
		}
		// A new key anyone can factor (goodkey): badPublicKey, saying why.
		r = e.post(t, a, url, inner(unsafeAccount(t), map[string]any{"account": a.kid, "oldKey": pub(a)}, url))
		if p := wantProblem(t, e, r, acme.ProblemBadPublicKey, 400); !strings.HasPrefix(p.Detail, "the new account key is unsafe: the RSA modulus's two prime factors are so close together") {
			t.Errorf("unsafe new key: %q", p.Detail)
		}
		// The new key belongs to another account: 409 with its Location.
		r = e.post(t, a, url, inner(other, map[string]any{"account": a.kid, "oldKey": pub(a)}, url))
		wantProblem(t, e, r, acme.ProblemMalformed, http.StatusConflict)
		if loc := r.header.Get("Location"); loc != other.kid {
			t.Errorf("409 Location = %q, want %q", loc, other.kid)
		}

		r = e.post(t, a, url, inner(next, map[string]any{"account": a.kid, "oldKey": pub(a)}, url))
		wantStatus(t, r, http.StatusOK)

		// The old key no longer works; the new one does.
		r = e.post(t, a, a.kid, nil)
		wantProblem(t, e, r, acme.ProblemMalformed, 400) // JWS verification error
		next.kid = a.kid
		wantStatus(t, e.post(t, next, a.kid, nil), http.StatusOK)
		r = e.post(t, &account{key: next.key, alg: next.alg}, e.base+"/acme/new-account", map[string]any{"onlyReturnExisting": true})
		wantStatus(t, r, http.StatusOK)
		if loc := r.header.Get("Location"); loc != a.kid {
			t.Errorf("lookup by new key Location = %q, want %q", loc, a.kid)
		}
	})
}
