package protocol

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
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
