package cli

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/tests/harness"
)

// TestCRLRestore: after the database is restored from an older copy,
// `hallmark crl restore FILE` revokes again, each with the reason listed,
// what a CRL the CA published before lists. A certificate the copy does
// not know is listed as unknown (exit 4); run again, nothing changes. A
// CRL no issuer of this CA signed is refused (exit 2).
func TestCRLRestore(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			c := newCA(t, d.url(t))
			ctx := context.Background()
			now := time.Now().Truncate(time.Second)
			issuer, key := harness.CRLIssuer(t, now)
			if err := c.st().IssuerPublish(ctx, "issuer-1", issuer.Raw); err != nil {
				t.Fatal(err)
			}
			a := c.account()
			c.issued(a, "compromised.example.com", "0d01")
			c.issued(a, "superseded.example.com", "d02")
			c.issued(a, "kept.example.com", "d03")
			c.issuedAs(a, "another-issuer.example.com", "d05", "issuer-2", "default")
			// What the CA published before the restore: d01 and d02
			// revoked, and d04, which the restored copy never saw.
			entries := []x509.RevocationListEntry{
				{SerialNumber: big.NewInt(0xd01), RevocationTime: now.Add(-time.Minute), ReasonCode: 1},
				{SerialNumber: big.NewInt(0xd02), RevocationTime: now.Add(-time.Minute), ReasonCode: 4},
				{SerialNumber: big.NewInt(0xd04), RevocationTime: now.Add(-time.Minute)},
				// The serial of another issuer's certificate, which this
				// CRL says nothing about.
				{SerialNumber: big.NewInt(0xd05), RevocationTime: now.Add(-time.Minute)},
			}
			der, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{Number: big.NewInt(now.UnixNano()), ThisUpdate: now, NextUpdate: now.Add(24 * time.Hour),
				RevokedCertificateEntries: entries}, issuer, key)
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), "before.crl")
			if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der}), 0o600); err != nil {
				t.Fatal(err)
			}

			r := c.want(4, "crl", "restore", "--dry-run", file)
			if strings.Count(r.stdout, "would-revoke") != 2 || c.cert("0d01").RevokedAt != nil {
				t.Fatalf("the dry run did not list the two to revoke, or revoked one:\n%s", r.stdout)
			}
			var rep struct {
				Issuer       string
				Certificates []struct {
					Serial, Outcome string
					Reason          int
				}
			}
			c.jsonOf(&rep, 4, "crl", "restore", "--json", file)
			want := map[string]string{"0d01": "revoked", "d02": "revoked", "d04": "unknown", "d05": "unknown"}
			if rep.Issuer != "issuer-1" || len(rep.Certificates) != len(want) {
				t.Fatalf("crl restore --json = %+v", rep)
			}
			for _, row := range rep.Certificates {
				if want[row.Serial] != row.Outcome {
					t.Errorf("%s: outcome %s, want %s", row.Serial, row.Outcome, want[row.Serial])
				}
			}
			for serial, reason := range map[string]int{"0d01": 1, "d02": 4} {
				if got := c.cert(serial); got.RevokedAt == nil || got.RevocationReason != reason {
					t.Errorf("certificate %s after the restore: revoked %v with reason %d, want reason %d", serial, got.RevokedAt, got.RevocationReason, reason)
				}
			}
			if c.cert("d03").RevokedAt != nil || c.cert("d05").RevokedAt != nil {
				t.Error("a certificate the CRL does not list, or another issuer's of a listed serial, was revoked")
			}
			// Again: nothing to revoke, the unknown one still unknown.
			r = c.want(4, "crl", "restore", file)
			if strings.Count(r.stdout, "already-revoked") != 2 || !strings.Contains(r.stderr, "issued after its copy") {
				t.Errorf("crl restore again: stdout\n%s\nstderr %q", r.stdout, r.stderr)
			}
			// Signed by no issuer of this CA.
			other := filepath.Join(t.TempDir(), "other.crl")
			if err := os.WriteFile(other, harness.SignedCRL(t, now, "d03"), 0o600); err != nil {
				t.Fatal(err)
			}
			if r := c.want(2, "crl", "restore", other); !strings.Contains(r.stderr, "not signed by an issuer of this CA") {
				t.Errorf("crl restore of another CA's CRL: stderr %q", r.stderr)
			}
			if c.cert("d03").RevokedAt != nil {
				t.Error("another CA's CRL revoked a certificate")
			}
		})
	}
}
