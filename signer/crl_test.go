package signer

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"math/big"
	"slices"
	"testing"
	"time"

	zx509 "github.com/zmap/zcrypto/x509"
	"github.com/zmap/zlint/v3"
	"github.com/zmap/zlint/v3/lint"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

func TestSignCRL(t *testing.T) {
	t.Parallel()
	now := time.Now().Truncate(time.Second).UTC()
	entries := []RevokedEntry{
		{Serial: big.NewInt(0x1001), RevokedAt: now.Add(-3 * time.Hour), Reason: 0}, // unspecified: no reasonCode
		{Serial: big.NewInt(0x1002), RevokedAt: now.Add(-2 * time.Hour), Reason: 1}, // keyCompromise
		{Serial: big.NewInt(0x1003), RevokedAt: now.Add(-time.Hour), Reason: 4},     // superseded
		{Serial: big.NewInt(0x1004), RevokedAt: now.Add(-time.Minute), Reason: 5},   // cessationOfOperation
	}
	for _, issuerKind := range []string{"p256", "p384", "rsa2048"} {
		iss, counter, _ := testCA(t, issuerKind, 5*365*24*time.Hour)
		tests := []struct {
			name    string
			number  int64
			entries []RevokedEntry
			url     string
		}{
			{"empty", 1, nil, testCRLURL},
			{"four entries", 2, entries, testCRLURL},
			// A shard's CRL (ca.crl_shards): its own URL in its IDP.
			{"shard 63", 3, entries, testCRLURL + "/63"},
		}
		for _, tc := range tests {
			t.Run(issuerKind+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				der, err := iss.SignCRL(tc.number, now, now.Add(7*24*time.Hour), tc.entries, tc.url)
				if err != nil {
					t.Fatal(err)
				}
				if counter.calls.Load() == 0 {
					t.Error("the issuer's key never signed")
				}
				crl, err := x509.ParseRevocationList(der)
				if err != nil {
					t.Fatal(err)
				}
				if err := crl.CheckSignatureFrom(iss.Cert); err != nil {
					t.Fatalf("CRL signature does not verify against the issuer: %v", err)
				}
				if crl.Number.Int64() != tc.number {
					t.Errorf("number %v, want %d", crl.Number, tc.number)
				}
				if !crl.ThisUpdate.Equal(now) || !crl.NextUpdate.Equal(now.Add(7*24*time.Hour)) {
					t.Errorf("thisUpdate %v nextUpdate %v", crl.ThisUpdate, crl.NextUpdate)
				}
				if !slices.Equal(crl.AuthorityKeyId, iss.Cert.SubjectKeyId) {
					t.Errorf("AKI %x, want issuer SKI %x", crl.AuthorityKeyId, iss.Cert.SubjectKeyId)
				}
				if len(crl.RevokedCertificateEntries) != len(tc.entries) {
					t.Fatalf("%d entries, want %d", len(crl.RevokedCertificateEntries), len(tc.entries))
				}
				for n, e := range crl.RevokedCertificateEntries {
					want := tc.entries[n]
					if e.SerialNumber.Cmp(want.Serial) != 0 || !e.RevocationTime.Equal(want.RevokedAt) || e.ReasonCode != want.Reason {
						t.Errorf("entry %d: serial %x at %v reason %d, want %x at %v reason %d",
							n, e.SerialNumber, e.RevocationTime, e.ReasonCode, want.Serial, want.RevokedAt, want.Reason)
					}
					hasReasonExt := slices.ContainsFunc(e.Extensions, func(x pkix.Extension) bool { return x.Id.Equal(asn1.ObjectIdentifier{2, 5, 29, 21}) })
					if hasReasonExt != (want.Reason != 0) {
						t.Errorf("entry %d: reasonCode extension present=%v for reason %d", n, hasReasonExt, want.Reason)
					}
				}
				assertIDP(t, crl, tc.url)
				zr, err := zx509.ParseRevocationList(der)
				if err != nil {
					t.Fatal(err)
				}
				reg, _ := lintRegistry()
				for name, r := range zlint.LintRevocationListEx(zr, reg).Results {
					if r.Status >= lint.Warn {
						t.Errorf("zlint %s: %s %s", name, r.Status, r.Details)
					}
				}
			})
		}
	}
}

func assertIDP(t *testing.T, crl *x509.RevocationList, url string) {
	t.Helper()
	for _, ext := range crl.Extensions {
		if !ext.Id.Equal(oidIssuingDistributionPoint) {
			continue
		}
		if !ext.Critical {
			t.Error("issuingDistributionPoint must be critical (RFC 5280 §5.2.5)")
		}
		var idp issuingDistributionPoint
		if rest, err := asn1.Unmarshal(ext.Value, &idp); err != nil || len(rest) != 0 {
			t.Fatalf("decoding issuingDistributionPoint: %v", err)
		}
		if len(idp.DistributionPoint.FullName) != 1 || idp.DistributionPoint.FullName[0].Tag != 6 || string(idp.DistributionPoint.FullName[0].Bytes) != url {
			t.Errorf("distributionPoint %+v, want URI %s", idp.DistributionPoint, url)
		}
		if !idp.OnlyContainsUserCerts {
			t.Error("onlyContainsUserCerts is not set")
		}
		return
	}
	t.Error("no issuingDistributionPoint extension")
}

func TestSignCRLRefuses(t *testing.T) {
	t.Parallel()
	iss, counter, _ := testCA(t, "p256", 5*365*24*time.Hour)
	now := time.Now()
	tests := []struct {
		name    string
		number  int64
		next    time.Time
		entries []RevokedEntry
		url     string
	}{
		{name: "reason 7 is unused", number: 1, next: now.Add(time.Hour), entries: []RevokedEntry{{Serial: big.NewInt(1), RevokedAt: now, Reason: 7}}, url: testCRLURL},
		{name: "removeFromCRL on a full CRL", number: 1, next: now.Add(time.Hour), entries: []RevokedEntry{{Serial: big.NewInt(1), RevokedAt: now, Reason: 8}}, url: testCRLURL},
		{name: "negative number", number: -1, next: now.Add(time.Hour), url: testCRLURL},
		{name: "nextUpdate before thisUpdate", number: 1, next: now.Add(-time.Hour), url: testCRLURL},
		{name: "no URL", number: 1, next: now.Add(time.Hour)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := iss.SignCRL(tc.number, now, tc.next, tc.entries, tc.url)
			assertProblem(t, err, acme.ProblemServerInternal)
		})
	}
	t.Cleanup(func() {
		if counter.calls.Load() != 0 {
			t.Error("the issuer's key signed a refused CRL")
		}
	})
}

// TestSignCRLLintRefusal: a CRL zlint rejects (a revocation dated after
// thisUpdate, RFC 5280 §5.3.2 ordering) is never signed by the issuer key.
func TestSignCRLLintRefusal(t *testing.T) {
	t.Parallel()
	iss, counter, _ := testCA(t, "p256", 5*365*24*time.Hour)
	now := time.Now()
	_, err := iss.SignCRL(3, now, now.Add(time.Hour), []RevokedEntry{{Serial: big.NewInt(9), RevokedAt: now.Add(time.Hour), Reason: 1}}, testCRLURL)
	assertProblem(t, err, acme.ProblemServerInternal)
	var le *LintError
	if !errors.As(err, &le) {
		t.Fatalf("got %v, want a *LintError", err)
	}
	t.Logf("refused by %v", le.Names())
	if counter.calls.Load() != 0 {
		t.Error("the issuer's key signed a CRL that failed lint")
	}
}
