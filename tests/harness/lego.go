package harness

import (
	"context"
	"crypto/x509"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"
)

// Lego runs a lego binary against one ACME server with one account
// directory.
type Lego struct {
	Bin       string   // the lego binary (RequireTool(t, "lego", ...))
	Directory string   // the ACME directory URL
	Root      string   // the PEM root lego trusts for the server
	Email     string   // the account's contact
	Path      string   // lego's --path: accounts and certificates
	Env       []string // added to lego's environment
}

// Run runs lego with the server, account and path flags followed by args,
// and returns its combined output.
func (l Lego) Run(ctx context.Context, args ...string) (string, error) {
	base := []string{"--server", l.Directory, "--email", l.Email, "--accept-tos", "--path", l.Path}
	cmd := exec.CommandContext(ctx, l.Bin, append(base, args...)...)
	cmd.Env = append(append(os.Environ(), "LEGO_CA_CERTIFICATES="+l.Root), l.Env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// ReadCert parses the first certificate in a PEM file a client saved.
func ReadCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	return ReadChain(t, path)[0]
}

// CheckCRLSignature fails the test unless crl is signed by cert's issuer,
// fetched from the certificate's own issuer URL (its AIA caIssuers) as a
// relying party would.
func CheckCRLSignature(t *testing.T, client *http.Client, crl *x509.RevocationList, cert *x509.Certificate) {
	t.Helper()
	if len(cert.IssuingCertificateURL) != 1 {
		t.Fatalf("certificate has issuer URLs %v, want one", cert.IssuingCertificateURL)
	}
	resp, err := client.Get(cert.IssuingCertificateURL[0])
	if err != nil {
		t.Fatalf("fetching the issuer at %s: %v", cert.IssuingCertificateURL[0], err)
	}
	der, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("fetching the issuer at %s: %s, %v", cert.IssuingCertificateURL[0], resp.Status, err)
	}
	issuer, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("the issuer at %s does not parse: %v", cert.IssuingCertificateURL[0], err)
	}
	if err := crl.CheckSignatureFrom(issuer); err != nil {
		t.Fatalf("the CRL at %v is not signed by the certificate's issuer %s: %v", cert.CRLDistributionPoints, issuer.Subject, err)
	}
}

// WaitRevoked polls the CRL at the certificate's one distribution point
// until its serial appears, as a relying party would see it, fails unless

// it carries reason, and returns the CRL's number.
func WaitRevoked(t *testing.T, client *http.Client, cert *x509.Certificate, reason int) *big.Int {
	t.Helper()
	if len(cert.CRLDistributionPoints) != 1 {
		t.Fatalf("certificate has CRL distribution points %v, want one", cert.CRLDistributionPoints)
	}
	deadline := time.Now().Add(30 * time.Second)
	listed := -1 // the reason the last CRL listed the serial with
	for {
		resp, err := client.Get(cert.CRLDistributionPoints[0])
		if err == nil {
			der, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				crl, err := x509.ParseRevocationList(der)
				if err != nil {
					t.Fatalf("the served CRL does not parse: %v", err)
				}
				CheckCRLSignature(t, client, crl, cert)
				for _, e := range crl.RevokedCertificateEntries {
					// Listed with another reason, it may be a reason the
					// next CRL changes (a key compromise reported after
					// another revocation): wait for that one.
					if e.SerialNumber.Cmp(cert.SerialNumber) == 0 {
						if e.ReasonCode == reason {
							return crl.Number
						}
						listed = e.ReasonCode
					}
				}
			}
		}
		if time.Now().After(deadline) && listed >= 0 {
			t.Fatalf("the CRL at %s lists serial %x with reason %d after 30s, want %d", cert.CRLDistributionPoints[0], cert.SerialNumber, listed, reason)
		}
		if time.Now().After(deadline) {
			t.Fatalf("serial %x did not appear in the CRL at %s within 30s", cert.SerialNumber, cert.CRLDistributionPoints[0])
		}
		time.Sleep(200 * time.Millisecond)
	}
}
