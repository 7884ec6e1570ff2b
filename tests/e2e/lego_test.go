package e2e

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hallmark-ca/hallmark/tests/harness"
)

// lego runs the lego binary against ca with its own account directory.
func lego(t *testing.T, ca *CA, path string, args ...string) (string, error) {
	t.Helper()
	return legoWith(t, requireTool(t, "lego", "apt-get install lego"), ca, path, args...)
}

// legoWith runs the given lego binary against ca.
func legoWith(t *testing.T, bin string, ca *CA, path string, args ...string) (string, error) {
	t.Helper()
	l := harness.Lego{Bin: bin, Directory: ca.BaseURL + "/directory", Root: ca.Root, Email: "e2e@hallmark.test", Path: path}
	return l.Run(context.Background(), args...)
}

// TestLegoIssueRevokeCRL is the first real certificate: lego obtains one over
// http-01 from the real binaries, revokes it, and its serial shows up in the
// CRL the frontend serves at the certificate's CRL distribution point.
func TestLegoIssueRevokeCRL(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.Name, func(t *testing.T) {
			requireTool(t, "lego", "apt-get install lego")
			ca := startCA(t, d.URL(t), "")
			path := t.TempDir()
			name := "www.e2e-" + d.Name + ".test"
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
			number := harness.WaitRevoked(t, ca.HTTPClient(), cert, 4)
			t.Logf("serial in CRL number %v", number)
		})
	}
}
