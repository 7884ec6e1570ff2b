package signer

import (
	"crypto/x509"
	"encoding/hex"
	"path/filepath"
	"slices"
	"testing"

	zx509 "github.com/zmap/zcrypto/x509"
	"github.com/zmap/zlint/v3"
)

// TestIntermediatesLint: zlint, with the lints every leaf passes, finds no
// error in the CA certificates `ca init --cross-root` and `ca intermediate`
// make (both roots, the intermediate, its cross-signed twin, a new
// intermediate of each key family and its twin), nor in either root's
// CRL, linted as a CRL of CA certificates. Each intermediate names its
// root's CRL, which that root signed.
func TestIntermediatesLint(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "ca")
	o := CAOptions{Name: "Lint", Country: "DE", URLBase: "http://ca.test"}
	if _, err := InitLocal(dir, o); err != nil {
		t.Fatal(err)
	}
	if _, err := InitCrossRoot(dir, o); err != nil {
		t.Fatal(err)
	}
	first, err := LoadLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	ec, err := CreateIntermediate(dir, o, "Lint E2", "p384")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := CreateIntermediate(dir, o, "Lint R2", "rsa2048")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := lintRegistry()
	if err != nil {
		t.Fatal(err)
	}
	root1, _ := ReadCertificates(filepath.Join(dir, RootCertFile))
	root2, _ := ReadCertificates(filepath.Join(dir, CrossRootCertFile))
	certs := []*x509.Certificate{root1[0], root2[0]}
	for _, iss := range []*Issuer{first, ec, rs} {
		certs = append(certs, iss.Cert, iss.AltChains[0][0])
	}
	for _, c := range certs {
		zc, err := zx509.ParseCertificate(c.Raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := lintFailure(c.Subject.CommonName, zlint.LintCertificateEx(zc, reg)); err != nil {
			t.Errorf("%s by %s: %v", c.Subject.CommonName, c.Issuer.CommonName, lintCause(err))
		}
		if !slices.Equal(c.Subject.Country, []string{"DE"}) {
			t.Errorf("%s: country %v, want [DE]", c.Subject.CommonName, c.Subject.Country)
		}
		if c.IsCA && !slices.Equal(c.RawIssuer, c.RawSubject) {
			parent := root1[0]
			if slices.Equal(c.RawIssuer, root2[0].RawSubject) {
				parent = root2[0]
			}
			if want := []string{RootCRLURL(o.URLBase, parent)}; !slices.Equal(c.CRLDistributionPoints, want) {
				t.Errorf("%s by %s names the CRL %v, want %v", c.Subject.CommonName, c.Issuer.CommonName, c.CRLDistributionPoints, want)
			}
		}
	}
	crls, err := RootCRLs(dir)
	if err != nil || len(crls) != 2 {
		t.Fatalf("RootCRLs = %d, %v; want both roots'", len(crls), err)
	}
	caReg, err := caLintRegistry()
	if err != nil {
		t.Fatal(err)
	}
	for n, c := range crls {
		zr, err := zx509.ParseRevocationList(c.DER)
		if err != nil {
			t.Fatal(err)
		}
		if err := lintFailure("root CRL", zlint.LintRevocationListEx(zr, caReg)); err != nil {
			t.Errorf("the CRL of %s: %v", certs[n].Subject.CommonName, lintCause(err))
		}
		if want := hex.EncodeToString(certs[n].SubjectKeyId); c.IssuerID != want || c.Number != zr.Number.Int64() {
			t.Errorf("root CRL %d: issuer %s number %d, want issuer %s and the number the CRL carries, %v", n, c.IssuerID, c.Number, want, zr.Number)
		}
	}
}
