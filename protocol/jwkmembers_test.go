package protocol_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/hallmark-ca/hallmark/protocol"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store/open"
)

// A client's "jwk" may carry members besides the key's own (RFC 7517 §4:
// kid, alg, use, x5c, ...). The store keeps, and the frontend caches, the
// key only: the members RFC 7638 §3.2 requires for its type
// (protocol/keys.go, jwkIdentity; migration 0007 for accounts stored
// before).

// keyTypes are an account key of each type Hallmark accepts.
func keyTypes(t *testing.T) []*account {
	t.Helper()
	r, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return []*account{newKey(t), {key: r, alg: jose.RS256}, {key: ed, alg: jose.EdDSA}}
}

// requiredMembers are the members RFC 7638 §3.2 names for a's key type.
func requiredMembers(a *account) []string {
	switch a.alg {
	case jose.RS256:
		return []string{"e", "kty", "n"}
	case jose.EdDSA:
		return []string{"crv", "kty", "x"}
	}
	return []string{"crv", "kty", "x", "y"}
}

// withExtras is a's key as a JWK with the members a client may add: a 4 KB
// kid (the request stays under the test server's 16 KB body limit), alg and
// use.
func withExtras(a *account) jose.JSONWebKey {
	return jose.JSONWebKey{Key: a.key, KeyID: "https://client.example/keys/" + strings.Repeat("k", 4<<10), Algorithm: string(a.alg), Use: "sig"}
}

// canonicalJWK is the JSON the store should hold for a's key: what go-jose
// writes for the bare public key.
func canonicalJWK(t *testing.T, a *account) string {
	t.Helper()
	b, err := json.Marshal(jose.JSONWebKey{Key: a.key.Public()})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// signJWK signs payload with a "jwk" header holding key, as a client that
// puts extra members in its JWK does; without nonce for keyChange's inner
// JWS.
func (e *env) signJWK(t *testing.T, alg jose.SignatureAlgorithm, key jose.JSONWebKey, url string, payload []byte, nonce bool) []byte {
	t.Helper()
	h := map[jose.HeaderKey]any{"url": url}
	if nonce {
		h["nonce"] = e.nonce(t)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, &jose.SignerOptions{EmbedJWK: true, ExtraHeaders: h})
	if err != nil {
		t.Fatal(err)
	}
	sig, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(sig.FullSerialize())
}

// wantStoredKey checks that the key the store holds for the account at kid
// is exactly a's canonical JWK with only the required members.
func (e *env) wantStoredKey(t *testing.T, kid string, a *account) {
	t.Helper()
	acct, err := e.st.AccountByID(context.Background(), lastSegment(kid))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(acct.KeyJWK, &m); err != nil {
		t.Fatalf("stored key %q: %v", acct.KeyJWK, err)
	}
	if names := slices.Sorted(maps.Keys(m)); !slices.Equal(names, requiredMembers(a)) {
		t.Errorf("stored key (%d bytes) has members %v, want %v", len(acct.KeyJWK), names, requiredMembers(a))
		return
	}
	if want := canonicalJWK(t, a); string(acct.KeyJWK) != want {
		t.Errorf("stored key %s\nwant       %s", acct.KeyJWK, want)
	}
}

// wantFoundByKey checks that requests signed with a's key reach the account
// at kid: by kid (POST-as-GET, then a newOrder, which a PostgreSQL store
// tries folded with the key remembered from the first), and by jwk
// (newAccount onlyReturnExisting, with the extra members and without).
func (e *env) wantFoundByKey(t *testing.T, a *account, kid, name string) {
	t.Helper()
	byKid := &account{key: a.key, alg: a.alg, kid: kid}
	wantStatus(t, e.post(t, byKid, kid, nil), http.StatusOK)
	r := e.post(t, byKid, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs(name)})
	wantStatus(t, r, http.StatusCreated)
	newAccount := e.base + "/acme/new-account"
	for _, body := range [][]byte{
		e.signJWK(t, a.alg, withExtras(a), newAccount, []byte(`{"onlyReturnExisting":true}`), true),
		e.sign(t, &account{key: a.key, alg: a.alg}, newAccount, []byte(`{"onlyReturnExisting":true}`), signOpts{}),
	} {
		r := e.postRaw(t, newAccount, "application/jose+json", body)
		wantStatus(t, r, http.StatusOK)
		if loc := r.header.Get("Location"); loc != kid {
			t.Errorf("onlyReturnExisting Location = %q, want %q", loc, kid)
		}
	}
}

// TestNewAccountStoresKeyOnly: an account registered with a jwk carrying
// kid, alg and use is stored with its key's required members only, and is
// found by requests signed with that key, by kid and by jwk.
func TestNewAccountStoresKeyOnly(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		for i, a := range keyTypes(t) {
			url := e.base + "/acme/new-account"
			r := e.postRaw(t, url, "application/jose+json", e.signJWK(t, a.alg, withExtras(a), url, []byte(`{"termsOfServiceAgreed":true}`), true))
			wantStatus(t, r, http.StatusCreated)
			kid := r.header.Get("Location")
			e.wantStoredKey(t, kid, a)
			e.wantFoundByKey(t, a, kid, []string{"ec", "rsa", "ed"}[i]+".extras.example")
		}
	})
}

// TestKeyChangeStoresKeyOnly: a keyChange to a key whose jwk carries extra
// members stores the new key's required members only; the account is
// found by the new key.
func TestKeyChangeStoresKeyOnly(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		url := e.base + "/acme/key-change"
		for i, next := range keyTypes(t) {
			a := e.register(t)
			payload, _ := json.Marshal(map[string]any{"account": a.kid, "oldKey": jose.JSONWebKey{Key: a.key.Public()}})
			inner := e.signJWK(t, next.alg, withExtras(next), url, payload, false)
			wantStatus(t, e.post(t, a, url, inner), http.StatusOK)
			e.wantStoredKey(t, a.kid, next)
			e.wantFoundByKey(t, next, a.kid, []string{"ec", "rsa", "ed"}[i]+".rekeyed.example")
		}
	})
}

// TestAccountKeysStoredWithExtraMembers: accounts stored before keys were
// stored bare (the JSON of the client's whole jwk) are found by their key,
// and migration 0007 rewrites them to the JSON a registration stores now,
// byte for byte, on both dialects, leaving bare rows alone; requests keep
// working across the rewrite although the frontend remembered the old
// JSON.
func TestAccountKeysStoredWithExtraMembers(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		type legacy struct {
			a   *account
			kid string
		}
		var accts []legacy
		for i, a := range keyTypes(t) {
			r := e.post(t, a, e.base+"/acme/new-account", map[string]any{"termsOfServiceAgreed": true})
			wantStatus(t, r, http.StatusCreated)
			kid := r.header.Get("Location")
			// What jwkIdentity stored before: json.Marshal of the
			// header's key, every member kept.
			old, err := json.Marshal(jose.JSONWebKey{Key: a.key.Public(), KeyID: withExtras(a).KeyID, Algorithm: string(a.alg), Use: "sig"})
			if err != nil {
				t.Fatal(err)
			}
			e.exec(t, "UPDATE accounts SET key_jwk = $1 WHERE id = $2", string(old), lastSegment(kid))
			e.wantFoundByKey(t, a, kid, []string{"ec", "rsa", "ed"}[i]+".before.example")
			accts = append(accts, legacy{a, kid})
		}
		bare := e.register(t)
		wantStatus(t, e.post(t, bare, bare.kid, nil), http.StatusOK)

		// Apply migration 0007 again, to these rows.
		e.exec(t, "DELETE FROM schema_migrations WHERE version = 7")
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := open.Migrate(ctx, e.url); err != nil {
			t.Fatalf("migrating: %v", err)
		}
		if n := e.count(t, "SELECT count(*) FROM schema_migrations WHERE version = 7"); n != 1 {
			t.Fatalf("migration 0007 recorded %d times after migrating", n)
		}
		for i, l := range accts {
			e.wantStoredKey(t, l.kid, l.a)
			e.wantFoundByKey(t, l.a, l.kid, []string{"ec", "rsa", "ed"}[i]+".after.example")
		}
		e.wantStoredKey(t, bare.kid, bare)
	})
}

// TestOversizedJWKRefused: a newAccount whose jwk is 45 KB of JSON (a P-256
// key and a huge kid, inside a 64 KB body limit) is refused as malformed
// and creates no account.
func TestOversizedJWKRefused(t *testing.T) {
	t.Parallel()
	withStores(t, func(c *protocol.Config) { c.Server.MaxBodyBytes = 64 << 10 }, func(t *testing.T, e *env) {
		a := newKey(t)
		url := e.base + "/acme/new-account"
		k := jose.JSONWebKey{Key: a.key, KeyID: strings.Repeat("k", 45<<10)}
		r := e.postRaw(t, url, "application/jose+json", e.signJWK(t, a.alg, k, url, []byte(`{"termsOfServiceAgreed":true}`), true))
		p := wantProblem(t, e, r, acme.ProblemMalformed, http.StatusBadRequest)
		if !strings.Contains(p.Detail, `"jwk" is `) || !strings.Contains(p.Detail, "at most 8192") {
			t.Errorf("detail %q does not say the jwk is too large", p.Detail)
		}
		r = e.post(t, a, url, map[string]any{"onlyReturnExisting": true})
		wantProblem(t, e, r, acme.ProblemAccountDoesNotExist, http.StatusBadRequest)
	})
}
