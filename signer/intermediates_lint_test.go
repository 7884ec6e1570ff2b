package signer

import (
	"crypto/x509"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	zx509 "github.com/zmap/zcrypto/x509"
	"github.com/zmap/zlint/v3"
)

// knownCALints are the CA/B Forum lints every intermediate of the dev CA
// fails, `ca init`'s since it was written: a publicly-trusted subordinate
// CA needs a country, certificate policies and its root's CRL URL, which a
// private CA's need not carry. Nothing else may fail.
var knownCALints = []string{"e_ca_country_name_missing", "e_invalid_ca_certificate_policies",
	"e_sub_ca_certificate_policies_missing", "e_sub_ca_crl_distribution_points_missing"}

// TestIntermediatesLint: zlint, with the lints every leaf passes, finds no
// error but knownCALints in the CA certificates `ca init --cross-root` and
// `ca intermediate` make: the intermediate, its cross-signed twin, a new
// intermediate of each key family and its twin.
func TestIntermediatesLint(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "ca")
	if _, err := InitLocal(dir, "Lint"); err != nil {
		t.Fatal(err)
	}
	if _, err := InitCrossRoot(dir, "Lint"); err != nil {
		t.Fatal(err)
	}
	first, err := LoadLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	ec, err := CreateIntermediate(dir, "Lint E2", "p384")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := CreateIntermediate(dir, "Lint R2", "rsa2048")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := lintRegistry()
	if err != nil {
		t.Fatal(err)
	}
	for _, iss := range []*Issuer{first, ec, rs} {
		for _, c := range append([]*x509.Certificate{iss.Cert}, iss.AltChains[0][0]) {
			zc, err := zx509.ParseCertificate(c.Raw)
			if err != nil {
				t.Fatal(err)
			}
			err = lintFailure(c.Subject.CommonName+" by "+c.Issuer.CommonName, zlint.LintCertificateEx(zc, reg))
			var le *LintError
			if err != nil && !errors.As(err, &le) {
				t.Fatal(err)
			}
			if le != nil && !slices.Equal(le.Names(), knownCALints) {
				t.Errorf("%s by %s fails %v; only %v are known", c.Subject.CommonName, c.Issuer.CommonName, le.Names(), knownCALints)
			}
		}
	}
}
