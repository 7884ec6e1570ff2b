package jws

import (
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

// BenchmarkParseVerify is the JWS work of every ACME POST: parse the
// flattened JSON, check the protected header, verify the signature with
// the account key (kid, as every request after newAccount is).
//
//	go test ./protocol/jws -run '^$' -bench . -benchmem
func BenchmarkParseVerify(b *testing.B) {
	for _, alg := range []struct {
		key string
		alg jose.SignatureAlgorithm
	}{{"p256", jose.ES256}, {"rsa2048", jose.RS256}, {"ed25519", jose.EdDSA}} {
		b.Run(alg.key, func(b *testing.B) {
			k := keys()[alg.key]
			body := newOrderBody(b, alg.alg, k)
			pub := &jose.JSONWebKey{Key: k.Public()}
			b.ReportAllocs()
			for b.Loop() {
				m, err := Parse(body)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := m.Verify(pub); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkParse is the shape checks alone, before any signature check.
//
//	go test ./protocol/jws -run '^$' -bench Parse$ -benchmem
func BenchmarkParse(b *testing.B) {
	body := newOrderBody(b, jose.ES256, keys()["p256"])
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(body); err != nil {
			b.Fatal(err)
		}
	}
}

// newOrderBody is a newOrder request signed by key with a kid, as a client
// sends it.
func newOrderBody(b *testing.B, alg jose.SignatureAlgorithm, key any) []byte {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: "https://ca.example/acme/acct/1"}},
		&jose.SignerOptions{ExtraHeaders: map[jose.HeaderKey]any{"nonce": "bm9uY2U", "url": "https://ca.example/acme/new-order"}})
	if err != nil {
		b.Fatal(err)
	}
	sig, err := signer.Sign([]byte(`{"identifiers":[{"type":"dns","value":"www.example.com"}]}`))
	if err != nil {
		b.Fatal(err)
	}
	return []byte(sig.FullSerialize())
}
