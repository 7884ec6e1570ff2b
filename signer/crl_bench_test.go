package signer

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"testing"
	"time"
)

// BenchmarkSignCRLBuildTwice is SignCRL as it was before signLinted: the
// 100,000-entry CRL encoded for the lint, then encoded again for the
// issuer's key. It stays as the reference SignCRL's one encoding is
// measured against.
//
//	go test ./signer -run '^$' -bench 'SignCRL' -benchtime 3x
func BenchmarkSignCRLBuildTwice(b *testing.B) {
	iss, _, _ := testCA(b, "p256", 5*365*24*time.Hour)
	now := time.Now().Truncate(time.Second)
	list := make([]x509.RevocationListEntry, 100_000)
	for n := range list {
		s, err := newSerial()
		if err != nil {
			b.Fatal(err)
		}
		list[n] = x509.RevocationListEntry{SerialNumber: s, RevocationTime: now.Add(-time.Duration(n) * time.Second).UTC(), ReasonCode: []int{0, 1, 4, 5}[n%4]}
	}
	idp, err := idpExtension(testCRLURL, false)
	if err != nil {
		b.Fatal(err)
	}
	tmpl := &x509.RevocationList{SignatureAlgorithm: x509.ECDSAWithSHA256, Number: big.NewInt(42), ThisUpdate: now.UTC(),
		NextUpdate: now.Add(7 * 24 * time.Hour).UTC(), RevokedCertificateEntries: list, ExtraExtensions: []pkix.Extension{idp}}
	for b.Loop() {
		if _, err := iss.lintCRL(tmpl, lintRegistry); err != nil {
			b.Fatal(err)
		}
		if _, err := x509.CreateRevocationList(rand.Reader, tmpl, iss.Cert, iss.Signer); err != nil {
			b.Fatal(err)
		}
	}
}
