package jws

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"slices"
	"strings"
	"sync"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

var b64 = base64.RawURLEncoding

// Keys are generated once: RSA generation is slow.
var keys = sync.OnceValue(func() map[string]crypto.Signer {
	m := map[string]crypto.Signer{}
	must := func(k crypto.Signer, err error) crypto.Signer {
		if err != nil {
			panic(err)
		}
		return k
	}
	m["p256"] = must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	m["p256b"] = must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	m["p384"] = must(ecdsa.GenerateKey(elliptic.P384(), rand.Reader))
	m["rsa2048"] = must(rsa.GenerateKey(rand.Reader, 2048))
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	m["ed25519"] = ed
	m["rsa1024"] = weakRSA()
	return m
})

// weakRSA returns a 1024-bit RSA key.
func weakRSA() *rsa.PrivateKey {
	// rsa.GenerateKey refuses sizes below 2048 bits (GODEBUG rsa1024min),
	// so the key is assembled from two random 512-bit primes.
	for {
		pp, err := rand.Prime(rand.Reader, 512)
		if err != nil {
			panic(err)
		}
		qq, err := rand.Prime(rand.Reader, 512)
		if err != nil {
			panic(err)
		}
		n := new(big.Int).Mul(pp, qq)
		if n.BitLen() != 1024 || pp.Cmp(qq) == 0 {
			continue
		}
		one := big.NewInt(1)
		phi := new(big.Int).Mul(new(big.Int).Sub(pp, one), new(big.Int).Sub(qq, one))
		e := big.NewInt(65537)
		d := new(big.Int).ModInverse(e, phi)
		if d == nil {
			continue
		}
		k := &rsa.PrivateKey{PublicKey: rsa.PublicKey{N: n, E: 65537}, D: d, Primes: []*big.Int{pp, qq}}
		k.Precompute()
		return k
	}
}

func algFor(k crypto.Signer) string {
	switch pub := k.Public().(type) {
	case *ecdsa.PublicKey:
		if pub.Curve == elliptic.P384() {
			return "ES384"
		}
		return "ES256"
	case *rsa.PublicKey:
		return "RS256"
	case ed25519.PublicKey:
		return "EdDSA"
	}
	panic("unknown key")
}

// rawSign signs protected||payload the way RFC 7515/7518 say, for any
// header, so tests can build JWS go-jose's signer would refuse to make.
func rawSign(k crypto.Signer, alg string, input []byte) []byte {
	switch key := k.(type) {
	case *ecdsa.PrivateKey:
		var digest []byte
		size := 32
		if alg == "ES384" {
			h := sha512.Sum384(input)
			digest, size = h[:], 48
		} else {
			h := sha256.Sum256(input)
			digest = h[:]
		}
		r, s, err := ecdsa.Sign(rand.Reader, key, digest)
		if err != nil {
			panic(err)
		}
		out := make([]byte, 2*size)
		r.FillBytes(out[:size])
		s.FillBytes(out[size:])
		return out
	case *rsa.PrivateKey:
		h := sha256.Sum256(input)
		sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, h[:])
		if err != nil {
			panic(err)
		}
		return sig
	case ed25519.PrivateKey:
		return ed25519.Sign(key, input)
	}
	panic("unknown key")
}

func jwkJSON(pub any) json.RawMessage {
	b, err := (&jose.JSONWebKey{Key: pub}).MarshalJSON()
	if err != nil {
		panic(err)
	}
	return b
}

// build makes a flattened JWS with header h signed by k with alg.
func build(k crypto.Signer, alg string, h map[string]any, payload []byte) map[string]any {
	if _, ok := h["alg"]; !ok {
		h["alg"] = alg
	}
	hb, _ := json.Marshal(h)
	prot := b64.EncodeToString(hb)
	pl := b64.EncodeToString(payload)
	sig := rawSign(k, alg, []byte(prot+"."+pl))
	return map[string]any{"protected": prot, "payload": pl, "signature": b64.EncodeToString(sig)}
}

func enc(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

const testURL = "https://ca.test/acme/new-order"
const testNonce = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

func jwkHeader(k crypto.Signer) map[string]any {
	return map[string]any{"jwk": jwkJSON(k.Public()), "url": testURL, "nonce": testNonce}
}

func kidHeader() map[string]any {
	return map[string]any{"kid": "https://ca.test/acme/acct/1", "url": testURL, "nonce": testNonce}
}

func problemOf(t *testing.T, err error) acme.ProblemType {
	t.Helper()
	var ae *acme.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T) is not an *acme.Error", err, err)
	}
	return ae.Problem.Type
}

func TestParseAndVerifyValid(t *testing.T) {
	t.Parallel()
	ks := keys()
	payload := []byte(`{"identifiers":[{"type":"dns","value":"a.example"}]}`)
	tests := []struct {
		name string
		key  string
		kid  bool
	}{
		{"ES256 jwk", "p256", false},
		{"ES384 jwk", "p384", false},
		{"RS256 jwk", "rsa2048", false},
		{"EdDSA jwk", "ed25519", false},
		{"ES256 kid", "p256", true},
		{"ES384 kid", "p384", true},
		{"RS256 kid", "rsa2048", true},
		{"EdDSA kid", "ed25519", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k := ks[tc.key]
			h := jwkHeader(k)
			if tc.kid {
				h = kidHeader()
			}
			m, err := Parse(enc(build(k, algFor(k), h, payload)))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if m.Alg != algFor(k) || m.URL != testURL || m.Nonce != testNonce {
				t.Fatalf("header not round-tripped: %+v", m)
			}
			verifyKey := &jose.JSONWebKey{Key: k.Public()}
			if tc.kid {
				if m.JWK != nil || m.KeyID != "https://ca.test/acme/acct/1" {
					t.Fatalf("kid message: JWK=%v KeyID=%q", m.JWK, m.KeyID)
				}
			} else {
				if m.JWK == nil || m.KeyID != "" {
					t.Fatalf("jwk message: JWK=%v KeyID=%q", m.JWK, m.KeyID)
				}
				verifyKey = m.JWK
			}
			// The payload as sent is there before verification, and is
			// what verification returns.
			if got := m.UnverifiedPayload(); string(got) != string(payload) {
				t.Fatalf("UnverifiedPayload %q, want %q", got, payload)
			}
			got, err := m.Verify(verifyKey)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if string(got) != string(payload) {
				t.Fatalf("payload %q, want %q", got, payload)
			}
		})
	}
	if got := (*Message)(nil).UnverifiedPayload(); got != nil {
		t.Errorf("a nil Message's UnverifiedPayload = %q, want nil", got)
	}
}

// TestGoJoseSignerOutputAccepted: what a go-jose based client (lego) sends
// parses and verifies, including the empty POST-as-GET payload.
func TestGoJoseSignerOutputAccepted(t *testing.T) {
	t.Parallel()
	k := keys()["p256"].(*ecdsa.PrivateKey)
	opts := (&jose.SignerOptions{EmbedJWK: true}).
		WithHeader("url", testURL).WithHeader("nonce", testNonce)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, opts)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := signer.Sign([]byte{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Parse([]byte(obj.FullSerialize()))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	got, err := m.Verify(m.JWK)
	if err != nil || len(got) != 0 {
		t.Fatalf("Verify = %q, %v; want empty payload", got, err)
	}
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	ks := keys()
	p256 := ks["p256"]
	payload := []byte(`{}`)
	good := func() map[string]any { return build(p256, "ES256", jwkHeader(p256), payload) }
	privJWK, _ := (&jose.JSONWebKey{Key: p256}).MarshalJSON()

	tests := []struct {
		name string
		body []byte
		want acme.ProblemType
	}{
		{"empty body", nil, acme.ProblemMalformed},
		{"non-JSON", []byte("hello"), acme.ProblemMalformed},
		{"JSON array", []byte(`[1,2]`), acme.ProblemMalformed},
		{"compact serialization", func() []byte {
			g := good()
			return []byte(g["protected"].(string) + "." + g["payload"].(string) + "." + g["signature"].(string))
		}(), acme.ProblemMalformed},
		{"general serialization", func() []byte {
			g := good()
			return enc(map[string]any{"payload": g["payload"], "signatures": []any{map[string]any{"protected": g["protected"], "signature": g["signature"]}}})
		}(), acme.ProblemMalformed},
		{"unprotected header", func() []byte {
			g := good()
			g["header"] = map[string]any{"kid": "x"}
			return enc(g)
		}(), acme.ProblemMalformed},
		{"missing signature member", func() []byte {
			g := good()
			delete(g, "signature")
			return enc(g)
		}(), acme.ProblemMalformed},
		{"duplicate member", func() []byte {
			g := good()
			return []byte(`{"protected":"` + g["protected"].(string) + `","protected":"e30","payload":"` + g["payload"].(string) + `","signature":"` + g["signature"].(string) + `"}`)
		}(), acme.ProblemMalformed},
		{"trailing data", append(enc(good()), []byte("{}")...), acme.ProblemMalformed},
		{"padded base64", func() []byte {
			g := good()
			g["payload"] = "e30="
			return enc(g)
		}(), acme.ProblemMalformed},
		{"alg none", func() []byte {
			h := jwkHeader(p256)
			h["alg"] = "none"
			g := build(p256, "ES256", h, payload)
			g["signature"] = ""
			return enc(g)
		}(), acme.ProblemBadSignatureAlgorithm},
		{"HS256", func() []byte {
			h := kidHeader()
			h["alg"] = "HS256"
			return enc(build(p256, "ES256", h, payload))
		}(), acme.ProblemBadSignatureAlgorithm},
		{"ES512 not offered", func() []byte {
			h := kidHeader()
			h["alg"] = "ES512"
			return enc(build(p256, "ES256", h, payload))
		}(), acme.ProblemBadSignatureAlgorithm},
		{"missing alg", func() []byte {
			h := kidHeader()
			h["alg"] = ""
			return enc(build(p256, "ES256", h, payload))
		}(), acme.ProblemMalformed},
		// RFC 8555 §6.7 badPublicKey: "The JWS was signed by a public key the
		// server does not support". RS256 itself is supported, so this is
		// not badSignatureAlgorithm.
		{"RS256 with a 1024-bit key", enc(build(ks["rsa1024"], "RS256", jwkHeader(ks["rsa1024"]), payload)), acme.ProblemBadPublicKey},
		{"ES384 with a P-256 key", func() []byte {
			return enc(build(p256, "ES256", map[string]any{"alg": "ES384", "jwk": jwkJSON(p256.Public()), "url": testURL, "nonce": testNonce}, payload))
		}(), acme.ProblemBadPublicKey},
		{"RS256 with an EC key", func() []byte {
			return enc(build(p256, "ES256", map[string]any{"alg": "RS256", "jwk": jwkJSON(p256.Public()), "url": testURL, "nonce": testNonce}, payload))
		}(), acme.ProblemBadPublicKey},
		{"both jwk and kid", func() []byte {
			h := jwkHeader(p256)
			h["kid"] = "https://ca.test/acme/acct/1"
			return enc(build(p256, "ES256", h, payload))
		}(), acme.ProblemMalformed},
		{"neither jwk nor kid", enc(build(p256, "ES256", map[string]any{"url": testURL, "nonce": testNonce}, payload)), acme.ProblemMalformed},
		{"empty kid", func() []byte {
			h := kidHeader()
			h["kid"] = ""
			return enc(build(p256, "ES256", h, payload))
		}(), acme.ProblemMalformed},
		{"missing url", func() []byte {
			h := jwkHeader(p256)
			delete(h, "url")
			return enc(build(p256, "ES256", h, payload))
		}(), acme.ProblemMalformed},
		{"url not a string", func() []byte {
			h := jwkHeader(p256)
			h["url"] = 7
			return enc(build(p256, "ES256", h, payload))
		}(), acme.ProblemMalformed},
		// RFC 8555 §6.5: a nonce "unacceptable (or not present)" is badNonce.
		{"missing nonce", func() []byte {
			h := jwkHeader(p256)
			delete(h, "nonce")
			return enc(build(p256, "ES256", h, payload))
		}(), acme.ProblemBadNonce},
		// RFC 8555 §6.5.1: a nonce that is not base64url is malformed.
		{"nonce not base64url", func() []byte {
			h := jwkHeader(p256)
			h["nonce"] = "not a nonce!"
			return enc(build(p256, "ES256", h, payload))
		}(), acme.ProblemMalformed},
		{"private key in jwk", func() []byte {
			h := jwkHeader(p256)
			h["jwk"] = json.RawMessage(privJWK)
			return enc(build(p256, "ES256", h, payload))
		}(), acme.ProblemBadPublicKey},
		{"symmetric jwk", func() []byte {
			h := jwkHeader(p256)
			h["jwk"] = map[string]any{"kty": "oct", "k": "c2VjcmV0"}
			return enc(build(p256, "ES256", h, payload))
		}(), acme.ProblemBadPublicKey},
		{"garbage jwk", func() []byte {
			h := jwkHeader(p256)
			h["jwk"] = map[string]any{"kty": "EC", "crv": "P-256", "x": "AAAA", "y": "AAAA"}
			return enc(build(p256, "ES256", h, payload))
		}(), acme.ProblemBadPublicKey},
		{"b64 false", func() []byte {
			h := jwkHeader(p256)
			h["b64"] = false
			h["crit"] = []string{"b64"}
			return enc(build(p256, "ES256", h, payload))
		}(), acme.ProblemMalformed},
		{"crit", func() []byte {
			h := jwkHeader(p256)
			h["crit"] = []string{"exp"}
			return enc(build(p256, "ES256", h, payload))
		}(), acme.ProblemMalformed},
		{"protected header not JSON", func() []byte {
			g := good()
			g["protected"] = b64.EncodeToString([]byte("nope"))
			return enc(g)
		}(), acme.ProblemMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := Parse(tc.body)
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", m)
			}
			if got := problemOf(t, err); got != tc.want {
				t.Fatalf("problem %s, want %s (%v)", got, tc.want, err)
			}
			// RFC 8555 §6.2: badSignatureAlgorithm MUST list the
			// algorithms the server accepts.
			if got := acme.AsError(err).Problem.Algorithms; tc.want == acme.ProblemBadSignatureAlgorithm && !slices.Equal(got, Algorithms) {
				t.Fatalf("algorithms %v, want %v", got, Algorithms)
			}
		})
	}
}

func TestVerifyRejects(t *testing.T) {
	t.Parallel()
	ks := keys()
	p256 := ks["p256"]
	tests := []struct {
		name string
		body func() []byte
		key  func(m *Message) *jose.JSONWebKey
		want acme.ProblemType
	}{
		{"signed by another key", func() []byte {
			return enc(build(ks["p256b"], "ES256", jwkHeader(p256), []byte(`{}`)))
		}, func(m *Message) *jose.JSONWebKey { return m.JWK }, acme.ProblemMalformed},
		{"payload tampered", func() []byte {
			g := build(p256, "ES256", jwkHeader(p256), []byte(`{"onlyReturnExisting":false}`))
			g["payload"] = b64.EncodeToString([]byte(`{"onlyReturnExisting":true}`))
			return enc(g)
		}, func(m *Message) *jose.JSONWebKey { return m.JWK }, acme.ProblemMalformed},
		{"header tampered", func() []byte {
			g := build(p256, "ES256", kidHeader(), []byte(`{}`))
			h := kidHeader()
			h["alg"] = "ES256"
			h["url"] = "https://ca.test/acme/revoke-cert"
			hb, _ := json.Marshal(h)
			g["protected"] = b64.EncodeToString(hb)
			return enc(g)
		}, func(*Message) *jose.JSONWebKey { return &jose.JSONWebKey{Key: p256.Public()} }, acme.ProblemMalformed},
		{"account key type differs from alg", func() []byte {
			return enc(build(p256, "ES256", kidHeader(), []byte(`{}`)))
		}, func(*Message) *jose.JSONWebKey { return &jose.JSONWebKey{Key: ks["rsa2048"].Public()} }, acme.ProblemBadPublicKey},
		{"weak stored RSA key", func() []byte {
			return enc(build(ks["rsa1024"], "RS256", kidHeader(), []byte(`{}`)))
		}, func(*Message) *jose.JSONWebKey { return &jose.JSONWebKey{Key: ks["rsa1024"].Public()} }, acme.ProblemBadPublicKey},
		{"private key given", func() []byte {
			return enc(build(p256, "ES256", kidHeader(), []byte(`{}`)))
		}, func(*Message) *jose.JSONWebKey { return &jose.JSONWebKey{Key: p256} }, acme.ProblemBadPublicKey},
		{"nil key", func() []byte {
			return enc(build(p256, "ES256", kidHeader(), []byte(`{}`)))
		}, func(*Message) *jose.JSONWebKey { return nil }, acme.ProblemBadPublicKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := Parse(tc.body())
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			p, err := m.Verify(tc.key(m))
			if err == nil {
				t.Fatalf("Verify accepted it, payload %q", p)
			}
			if got := problemOf(t, err); got != tc.want {
				t.Fatalf("problem %s, want %s (%v)", got, tc.want, err)
			}
			if tc.want == acme.ProblemMalformed && !strings.Contains(err.Error(), "JWS verification error") {
				t.Fatalf("detail %q does not say JWS verification error", err)
			}
		})
	}
}

// TestThumbprintRFC7638 uses the example of RFC 7638 §3.1.
func TestThumbprintRFC7638(t *testing.T) {
	t.Parallel()
	const n = "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"
	var k jose.JSONWebKey
	if err := k.UnmarshalJSON([]byte(`{"kty":"RSA","n":"` + n + `","e":"AQAB","alg":"RS256","kid":"2011-04-29"}`)); err != nil {
		t.Fatal(err)
	}
	got, err := Thumbprint(&k)
	if err != nil {
		t.Fatal(err)
	}
	if want := "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"; got != want {
		t.Fatalf("thumbprint %s, want %s", got, want)
	}
	// A private key's thumbprint is its public key's.
	p := keys()["p256"]
	a, _ := Thumbprint(&jose.JSONWebKey{Key: p})
	b, _ := Thumbprint(&jose.JSONWebKey{Key: p.Public()})
	if a != b || a == "" {
		t.Fatalf("private %q vs public %q", a, b)
	}
	if _, err := Thumbprint(nil); err == nil {
		t.Fatal("Thumbprint(nil) succeeded")
	}
}

func TestParseInner(t *testing.T) {
	t.Parallel()
	ks := keys()
	newKey, oldKey := ks["p384"], ks["p256"]
	payload := []byte(`{"account":"https://ca.test/acme/acct/1","oldKey":{}}`)
	inner := func(h map[string]any, signer crypto.Signer) []byte {
		return enc(build(signer, algFor(signer), h, payload))
	}
	innerHeader := func() map[string]any {
		return map[string]any{"jwk": jwkJSON(newKey.Public()), "url": "https://ca.test/acme/key-change"}
	}

	m, got, err := ParseInner(inner(innerHeader(), newKey))
	if err != nil {
		t.Fatalf("valid inner JWS refused: %v", err)
	}
	if string(got) != string(payload) || m.URL != "https://ca.test/acme/key-change" || m.JWK == nil || m.Nonce != "" {
		t.Fatalf("inner message %+v payload %q", m, got)
	}

	tests := []struct {
		name string
		body []byte
		want acme.ProblemType
	}{
		{"kid instead of jwk", func() []byte {
			h := innerHeader()
			delete(h, "jwk")
			h["kid"] = "https://ca.test/acme/acct/1"
			return inner(h, newKey)
		}(), acme.ProblemMalformed},
		{"kid and jwk", func() []byte {
			h := innerHeader()
			h["kid"] = "https://ca.test/acme/acct/1"
			return inner(h, newKey)
		}(), acme.ProblemMalformed},
		{"nonce present", func() []byte {
			h := innerHeader()
			h["nonce"] = testNonce
			return inner(h, newKey)
		}(), acme.ProblemMalformed},
		{"no url", func() []byte {
			h := innerHeader()
			delete(h, "url")
			return inner(h, newKey)
		}(), acme.ProblemMalformed},
		{"signed by the old key", inner(innerHeader(), oldKey), acme.ProblemBadPublicKey}, // ES256 sig, P-384 jwk
		{"signed by another key of the same type", inner(innerHeader(), func() crypto.Signer {
			k, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
			return k
		}()), acme.ProblemMalformed},
		{"compact", []byte("a.b.c"), acme.ProblemMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := ParseInner(tc.body)
			if err == nil {
				t.Fatal("ParseInner accepted it")
			}
			if got := problemOf(t, err); got != tc.want {
				t.Fatalf("problem %s, want %s (%v)", got, tc.want, err)
			}
		})
	}
}

// TestJWKSizeBound: a "jwk" larger than maxJWKBytes is refused as malformed,
// saying so, in a request and in keyChange's inner JWS; the largest key
// accepted (4096-bit RSA) with the members clients add, and a jwk of
// exactly the bound, still parse; a larger RSA key is refused for its size.
func TestJWKSizeBound(t *testing.T) {
	t.Parallel()
	p256 := keys()["p256"]
	// padded is p256's public JWK with a "kid" member that makes it n
	// bytes of JSON.
	padded := func(n int) json.RawMessage {
		base := jwkJSON(p256.Public())
		pad := n - len(base) - len(`,"kid":""`)
		b := append([]byte(nil), base[:len(base)-1]...)
		b = append(b, `,"kid":"`+strings.Repeat("k", pad)+`"}`...)
		if len(b) != n {
			t.Fatalf("padded jwk is %d bytes, want %d", len(b), n)
		}
		return b
	}
	withJWK := func(jwk json.RawMessage) map[string]any {
		h := jwkHeader(p256)
		h["jwk"] = jwk
		return h
	}
	if _, err := Parse(enc(build(p256, "ES256", withJWK(padded(maxJWKBytes)), []byte(`{}`)))); err != nil {
		t.Fatalf("a jwk of exactly %d bytes refused: %v", maxJWKBytes, err)
	}
	for _, n := range []int{maxJWKBytes + 1, 45 << 10} {
		_, err := Parse(enc(build(p256, "ES256", withJWK(padded(n)), []byte(`{}`))))
		if err == nil {
			t.Fatalf("a jwk of %d bytes was accepted", n)
		}
		if got := problemOf(t, err); got != acme.ProblemMalformed {
			t.Fatalf("a jwk of %d bytes: problem %s, want malformed (%v)", n, got, err)
		}
		if d := acme.AsError(err).Problem.Detail; !strings.Contains(d, `"jwk" is `) || !strings.Contains(d, "at most 8192") {
			t.Errorf("detail %q does not say the jwk is too large", d)
		}
	}
	inner := map[string]any{"jwk": padded(maxJWKBytes + 1), "url": "https://ca.test/acme/key-change"}
	if _, _, err := ParseInner(enc(build(p256, "ES256", inner, []byte(`{}`)))); err == nil || problemOf(t, err) != acme.ProblemMalformed ||
		!strings.Contains(acme.AsError(err).Problem.Detail, "inner JWS of keyChange \"jwk\" is") {
		t.Fatalf("inner JWS with an oversized jwk: %v", err)
	}

	// RSA public keys with kid, alg and use: Parse does not check the
	// signature, so the modulus need not be a real key's. The largest
	// accepted (maxRSABits) parses and is well inside the bound; a larger
	// one is refused with badPublicKey saying which keys are accepted, not
	// for its size.
	rsaJWK := func(bits int) json.RawMessage {
		n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), uint(bits)))
		if err != nil {
			t.Fatal(err)
		}
		n.SetBit(n, bits-1, 1).SetBit(n, 0, 1)
		b, err := json.Marshal(jose.JSONWebKey{Key: &rsa.PublicKey{N: n, E: 65537}, KeyID: "https://client.example/keys/" + strings.Repeat("0", 64), Algorithm: "RS256", Use: "sig"})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	parseRSA := func(jwk json.RawMessage) error {
		h := jwkHeader(p256)
		h["alg"], h["jwk"] = "RS256", jwk
		hb, _ := json.Marshal(h)
		_, err := Parse(enc(map[string]any{"protected": b64.EncodeToString(hb), "payload": b64.EncodeToString([]byte(`{}`)), "signature": b64.EncodeToString(make([]byte, 512))}))
		return err
	}
	jwk := rsaJWK(maxRSABits)
	if err := parseRSA(jwk); err != nil {
		t.Fatalf("a %d-bit RSA jwk (%d bytes) refused: %v", maxRSABits, len(jwk), err)
	}
	if len(jwk)*4 > maxJWKBytes {
		t.Errorf("a %d-bit RSA JWK is %d bytes, not comfortably below the bound %d", maxRSABits, len(jwk), maxJWKBytes)
	}
	for _, bits := range []int{maxRSABits + 8, 8192} {
		err := parseRSA(rsaJWK(bits))
		p := acme.AsError(err)
		if err == nil || p.Problem.Type != acme.ProblemBadPublicKey || !strings.Contains(p.Problem.Detail, "RSA key of 2048 to 4096 bits") {
			t.Errorf("a %d-bit RSA jwk: %v, want badPublicKey naming the accepted sizes", bits, err)
		}
	}
}
