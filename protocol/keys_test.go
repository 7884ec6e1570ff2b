package protocol

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"maps"
	"math/big"
	"slices"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

// TestKeyCache: a cached key is the key its JSON says, a different JSON
// (a key change) is a different key, and junk is refused, not cached.
func TestKeyCache(t *testing.T) {
	raw := func() []byte {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		b, err := json.Marshal(jose.JSONWebKey{Key: &k.PublicKey})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var c keyCache
	a, b := raw(), raw()
	ka1, err := c.parse(a)
	if err != nil {
		t.Fatal(err)
	}
	ka2, _ := c.parse(append([]byte(nil), a...))
	kb, _ := c.parse(b)
	if ka1 != ka2 {
		t.Error("the same stored key was parsed twice")
	}
	ta, _ := ka1.Thumbprint(crypto.SHA256)
	tb, _ := kb.Thumbprint(crypto.SHA256)
	if string(ta) == string(tb) {
		t.Error("a different stored key gave the cached one")
	}
	for _, bad := range []string{`{}`, `not json`, `{"kty":"EC","crv":"P-256","x":"AA","y":"AA"}`} {
		if _, err := c.parse([]byte(bad)); err == nil {
			t.Errorf("parse(%s) succeeded", bad)
		}
	}
	if len(c.m) != 2 {
		t.Errorf("cache holds %d keys, want 2", len(c.m))
	}
}

// TestJWKIdentityCanonical: what the store keeps of a key is its public JWK
// with only the members RFC 7638 §3.2 requires for its type, whatever else
// the client's "jwk" carried, and the same bytes as for the bare key.
func TestJWKIdentityCanonical(t *testing.T) {
	t.Parallel()
	ec, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	for _, tc := range []struct {
		name string
		pub  any
		want []string
	}{
		{"EC", ec.Public(), []string{"crv", "kty", "x", "y"}},
		{"RSA", rk.Public(), []string{"e", "kty", "n"}},
		{"OKP", ed.Public(), []string{"crv", "kty", "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bare, err := json.Marshal(jose.JSONWebKey{Key: tc.pub})
			if err != nil {
				t.Fatal(err)
			}
			// As a client sent it: the key, the members a JWK may add
			// (RFC 7517 §4) and one nobody defined.
			var m map[string]any
			if err := json.Unmarshal(bare, &m); err != nil {
				t.Fatal(err)
			}
			m["kid"], m["use"], m["key_ops"], m["x-unknown"] = strings.Repeat("k", 4096), "sig", []string{"verify"}, 7
			sent, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			var k jose.JSONWebKey
			if err := k.UnmarshalJSON(sent); err != nil {
				t.Fatal(err)
			}
			raw, thumb, err := jwkIdentity(&k)
			if err != nil {
				t.Fatal(err)
			}
			if string(raw) != string(bare) {
				t.Errorf("stored %s\nwant     %s", raw, bare)
			}
			var got map[string]json.RawMessage
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatal(err)
			}
			if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, tc.want) {
				t.Errorf("stored members %v, want %v", names, tc.want)
			}
			_, bareThumb, _ := jwkIdentity(&jose.JSONWebKey{Key: tc.pub})
			if thumb != bareThumb {
				t.Errorf("thumbprint %s, want the bare key's %s", thumb, bareThumb)
			}
		})
	}
	// A key carrying a certificate chain (x5c) and alg is stored without them.
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), PublicKey: ec.Public()}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, ec.Public(), ec)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	raw, _, err := jwkIdentity(&jose.JSONWebKey{Key: ec.Public(), Algorithm: "ES384", Use: "sig", KeyID: "k", Certificates: []*x509.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	bare, _ := json.Marshal(jose.JSONWebKey{Key: ec.Public()})
	if string(raw) != string(bare) {
		t.Errorf("with x5c: stored %s, want %s", raw, bare)
	}
}
