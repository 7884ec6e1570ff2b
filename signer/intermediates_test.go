package signer

import (
	"context"
	"crypto/x509"
	"path/filepath"
	"testing"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/profile"
)

// TestIntermediatesAndCrossRoot: `ca init` with a cross root, then a new
// RSA intermediate: each issuer loads with one alternate chain, and a leaf
// of each verifies to the first root by its chain and to the second by its
// alternate one.
func TestIntermediatesAndCrossRoot(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "ca")
	if _, err := InitLocal(dir, CAOptions{Name: "Acme", URLBase: "http://ca.test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := InitCrossRoot(dir, CAOptions{Name: "Acme", URLBase: "http://ca.test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := InitCrossRoot(dir, CAOptions{Name: "Acme", URLBase: "http://ca.test"}); err == nil {
		t.Fatal("a second cross root replaced the first")
	}
	first, err := LoadLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	made, err := CreateIntermediate(dir, CAOptions{URLBase: "http://ca.test"}, "Acme Intermediate R2", "rsa2048")
	if err != nil {
		t.Fatal(err)
	}
	again, err := LoadIntermediate(dir, made.ID)
	if err != nil || again.ID != made.ID {
		t.Fatalf("LoadIntermediate(%s) = %v, %v", made.ID, again, err)
	}
	if byID, err := LoadIntermediate(dir, first.ID); err != nil || byID.ID != first.ID {
		t.Fatalf("LoadIntermediate of ca init's = %v, %v", byID, err)
	}
	if _, err := LoadIntermediate(dir, "../root"); err == nil {
		t.Fatal("an id that is no hex loaded")
	}
	root1, _ := ReadCertificates(filepath.Join(dir, RootCertFile))
	root2, _ := ReadCertificates(filepath.Join(dir, CrossRootCertFile))
	for _, iss := range []*Issuer{first, again} {
		iss.Logger = quietLog
		if len(iss.AltChains) != 1 || len(iss.AltChainsPEM()) != 1 {
			t.Fatalf("%s: %d alternate chains, want 1", iss.Cert.Subject.CommonName, len(iss.AltChains))
		}
		key := newKey(t, "p256")
		got, err := iss.Issue(context.Background(), Request{
			Profile: profile.Profile{ValidityHours: 24, KeyTypes: []string{"p256"}, IdentifierTypes: []string{"dns"},
				KeyUsages: []string{"digitalSignature"}, ExtKeyUsages: []string{"serverAuth"}},
			ProfileName: "t", Names: []acme.Identifier{{Type: acme.IdentifierDNS, Value: "x.example.com"}},
			PublicKey: key.Public(), IssuerURL: "http://ca.example/issuer/x", CRLURL: "http://ca.example/crl/x",
		})
		if err != nil {
			t.Fatal(err)
		}
		leaf, _ := x509.ParseCertificate(got.DER)
		for i, c := range []struct {
			chain []*x509.Certificate
			root  *x509.Certificate
		}{{iss.Chain, root1[0]}, {iss.AltChains[0], root2[0]}} {
			roots, inter := x509.NewCertPool(), x509.NewCertPool()
			roots.AddCert(c.root)
			for _, x := range c.chain {
				inter.AddCert(x)
			}
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter}); err != nil {
				t.Errorf("%s chain %d: %v", iss.Cert.Subject.CommonName, i, err)
			}
		}
	}
}
