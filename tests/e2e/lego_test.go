package e2e

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// lego runs the lego binary against ca with its own account directory.
func lego(t *testing.T, ca *CA, path string, args ...string) (string, error) {
	t.Helper()
	return legoWith(t, requireTool(t, "lego", "apt-get install lego"), ca, path, args...)
}

// legoWith runs the given lego binary against ca.
func legoWith(t *testing.T, bin string, ca *CA, path string, args ...string) (string, error) {
	t.Helper()
	base := []string{"--server", ca.BaseURL + "/directory", "--email", "e2e@hallmark.test", "--accept-tos", "--path", path}
	cmd := exec.Command(bin, append(base, args...)...)
	cmd.Env = append(os.Environ(), "LEGO_CA_CERTIFICATES="+ca.Root)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the certificate lego saved: %v", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s holds no PEM", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestLegoIssueRevokeCRL is the first real certificate: lego obtains one over
// http-01 from the real binaries, revokes it, and its serial shows up in the
// CRL the frontend serves at the certificate's CRL distribution point.
func TestLegoIssueRevokeCRL(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			requireTool(t, "lego", "apt-get install lego")
			ca := startCA(t, d.url(t), "")
			path := t.TempDir()
			name := "www.e2e-" + d.name + ".test"
			out, err := lego(t, ca, path, "--domains", name, "--http", "--http.port", fmt.Sprintf("127.0.0.1:%d", ca.HTTPPort), "run")
			if err != nil {
				t.Fatalf("lego run: %v\n%s", err, out)
			}
			cert := readCert(t, filepath.Join(path, "certificates", name+".crt"))
			if len(cert.DNSNames) != 1 || cert.DNSNames[0] != name {
				t.Fatalf("certificate names %v, want [%s]", cert.DNSNames, name)
			}
			roots := x509.NewCertPool()
			rootPEM, _ := os.ReadFile(ca.Root)
			roots.AppendCertsFromPEM(rootPEM)
			inter := x509.NewCertPool()
			chain, _ := os.ReadFile(filepath.Join(path, "certificates", name+".crt"))
			inter.AppendCertsFromPEM(chain)
			if _, err := cert.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, Intermediates: inter}); err != nil {
				t.Fatalf("the issued chain does not verify to the dev root: %v", err)
			}
			if len(cert.CRLDistributionPoints) != 1 {
				t.Fatalf("certificate has CRL distribution points %v, want one", cert.CRLDistributionPoints)
			}
			t.Logf("issued serial %x to %s", cert.SerialNumber, name)

			out, err = lego(t, ca, path, "--domains", name, "revoke", "--reason", "4")
			if err != nil {
				t.Fatalf("lego revoke: %v\n%s", err, out)
			}
			// The CRL is signed by the worker after the revocation; poll.
			client := ca.HTTPClient()
			deadline := time.Now().Add(30 * time.Second)
			for {
				resp, err := client.Get(cert.CRLDistributionPoints[0])
				if err == nil {
					der, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode == 200 {
						crl, err := x509.ParseRevocationList(der)
						if err != nil {
							t.Fatalf("the served CRL does not parse: %v", err)
						}
						for _, e := range crl.RevokedCertificateEntries {
							if e.SerialNumber.Cmp(cert.SerialNumber) == 0 {
								if e.ReasonCode != 4 {
									t.Fatalf("CRL reason %d, want 4 (superseded)", e.ReasonCode)
								}
								t.Logf("serial in CRL number %v", crl.Number)
								return
							}
						}
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("serial %x did not appear in the CRL at %s within 30s", cert.SerialNumber, cert.CRLDistributionPoints[0])
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
	}
}
