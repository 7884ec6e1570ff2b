package e2e

import (
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/tests/harness"
)

var (
	loadOnce sync.Once
	loadBin  string
	loadErr  error
)

// hallmarkLoad builds the load generator once: an outside ACME client.
func hallmarkLoad(t *testing.T) string {
	t.Helper()
	loadOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hallmark-load-bin-")
		if err != nil {
			loadErr = err
			return
		}
		loadBin = filepath.Join(dir, "hallmark-load")
		out, err := exec.Command("go", "build", "-o", loadBin, "github.com/hallmark-ca/hallmark/cmd/hallmark-load").CombinedOutput()
		if err != nil {
			loadErr = fmt.Errorf("building hallmark-load: %v\n%s", err, out)
		}
	})
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	return loadBin
}

type issuerListed struct {
	ID          string   `json:"id"`
	State       string   `json:"state"`
	Profiles    []string `json:"profiles"`
	Outstanding int      `json:"outstanding"`
	Chains      int      `json:"alternate_chains"`
}

func listIssuers(t *testing.T, ca *CA) map[string]issuerListed {
	t.Helper()
	var rows []issuerListed
	out := ca.Run("hallmark", "--config", ca.Config, "issuers", "list", "--json")
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("issuers list --json: %v\n%s", err, out)
	}
	m := map[string]issuerListed{}
	for _, r := range rows {
		m[r.ID] = r
	}
	return m
}

// TestRotationUnderLoad is issue 39's rotation: lego gets a certificate;
// the operator creates an intermediate and rotates the profile to it while
// a load of issuances runs, none of which fails; lego gets a second
// certificate, from the new issuer, on the chain to the cross root it
// prefers; the first is revoked and appears on the old issuer's CRL, signed
// by the old issuer, which signs no certificate after the rotation.
func TestRotationUnderLoad(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.Name, func(t *testing.T) {
			requireTool(t, "lego", "apt-get install lego")
			load := hallmarkLoad(t)
			ca := harness.StartCA(t, d.URL(t), harness.Options{InitArgs: []string{"--cross-root"}})
			path := t.TempDir()
			http01 := fmt.Sprintf("127.0.0.1:%d", ca.HTTPPort)
			first := "first.rotate-" + d.Name + ".test"
			if out, err := lego(t, ca, path, "--domains", first, "--http", "--http.port", http01, "run"); err != nil {
				t.Fatalf("lego run: %v\n%s", err, out)
			}
			cert1 := readCert(t, filepath.Join(path, "certificates", first+".crt"))
			oldID := hex.EncodeToString(cert1.AuthorityKeyId)
			if got := listIssuers(t, ca)[oldID]; got.State != "active" || got.Chains != 1 || len(got.Profiles) != 1 {
				t.Fatalf("the dev CA's issuer %s is listed as %+v; want active for default with one alternate chain", oldID, got)
			}

			out := ca.Run("hallmark", "--config", ca.Config, "issuers", "create", "--name", "Hallmark Development Intermediate B")
			m := regexp.MustCompile(`created issuer ([0-9a-f]+)`).FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("issuers create printed no issuer id:\n%s", out)
			}
			newID := m[1]

			atRotation := rotateUnderLoad(t, ca, load, http01, "default", oldID, newID)

			second := "second.rotate-" + d.Name + ".test"
			if out, err := lego(t, ca, path, "--domains", second, "--http", "--http.port", http01, "run",
				"--preferred-chain", "Hallmark Development Root CA X2"); err != nil {
				t.Fatalf("lego run --preferred-chain: %v\n%s", err, out)
			}
			cert2 := readCert(t, filepath.Join(path, "certificates", second+".crt"))
			if got := hex.EncodeToString(cert2.AuthorityKeyId); got != newID {
				t.Fatalf("the second certificate is signed by %s, want the new issuer %s", got, newID)
			}
			harness.WantChainTo(t, filepath.Join(path, "certificates", second+".crt"), filepath.Join(ca.Dir, "ca", "root-x2.pem"), "Hallmark Development Root CA X2", "")

			// The new issuer, made while the worker ran, signs its CRLs.
			wantCRLOf(t, ca, cert2)
			// Its certificate and its cross-signed twin each name their
			// root's CRL, which the frontend serves, signed by that root.
			wantRootCRL(t, ca, harness.ReadChain(t, filepath.Join(path, "certificates", second+".crt"))[1])
			wantRootCRL(t, ca, issuerCert(t, ca, cert2))

			if out, err := lego(t, ca, path, "--domains", first, "revoke", "--reason", "4"); err != nil {
				t.Fatalf("lego revoke: %v\n%s", err, out)
			}
			// The old issuer's CRL, whole (/crl/<id>) or one of its shards (/crl/<id>/<shard>).
			if dp := cert1.CRLDistributionPoints[0]; !strings.HasSuffix(dp, "/crl/"+oldID) && !strings.Contains(dp, "/crl/"+oldID+"/") {
				t.Fatalf("the first certificate's CRL is %v, not the old issuer's", cert1.CRLDistributionPoints)
			}
			// Listed on the old issuer's CRL, signed by the old issuer.
			harness.WaitRevoked(t, ca.HTTPClient(), cert1, 4)

			end := listIssuers(t, ca)
			if end[oldID].Outstanding != atRotation[oldID].Outstanding {
				t.Fatalf("the old issuer signed %d certificates after the rotation", end[oldID].Outstanding-atRotation[oldID].Outstanding)
			}
			if end[newID].Outstanding < 2 {
				t.Fatalf("the new issuer signed %d certificates; want the load's after the rotation and lego's second", end[newID].Outstanding)
			}
			t.Logf("old issuer %s: %d certificates, new issuer %s: %d", oldID, end[oldID].Outstanding, newID, end[newID].Outstanding)

			// The retiring issuer is not retired while its certificates live.
			retire := exec.Command(harness.Bin("hallmark"), "--config", ca.Config, "issuers", "retire", oldID)
			retire.Dir = ca.Dir
			if out, err := retire.CombinedOutput(); err == nil || !strings.Contains(string(out), "have not expired") {
				t.Fatalf("issuers retire of the retiring issuer: %v\n%s; want a refusal naming its live certificates", err, out)
			}
			for _, action := range []string{"issuer.create", "issuer.rotate"} {
				if audit := ca.Run("hallmark", "--config", ca.Config, "audit", "list", "--kind", action, "--json"); !strings.Contains(audit, action) {
					t.Errorf("the audit log has no %s event", action)
				}
			}
		})
	}
}

// issuerCert is the certificate at cert's AIA caIssuers URL: its issuer's,
// on the default chain.
func issuerCert(t *testing.T, ca *CA, cert *x509.Certificate) *x509.Certificate {
	t.Helper()
	resp, err := ca.HTTPClient().Get(cert.IssuingCertificateURL[0])
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	der, _ := io.ReadAll(resp.Body)
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("GET %s: %d, %v", cert.IssuingCertificateURL[0], resp.StatusCode, err)
	}
	return c
}

// wantRootCRL fails unless inter names one CRL distribution point, that
// of the root of ca.dir that signed it, where the frontend serves a CRL
// that root signed, valid now and not listing inter.
func wantRootCRL(t *testing.T, ca *CA, inter *x509.Certificate) {
	t.Helper()
	if len(inter.CRLDistributionPoints) != 1 {
		t.Fatalf("%s names the CRLs %v; want its root's", inter.Subject.CommonName, inter.CRLDistributionPoints)
	}
	url := inter.CRLDistributionPoints[0]
	resp, err := ca.HTTPClient().Get(url)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s (the CRL %s names): %d %s", url, inter.Subject.CommonName, resp.StatusCode, der)
	}
	crl, err := x509.ParseRevocationList(der)
	if err != nil {
		t.Fatalf("the CRL at %s: %v", url, err)
	}
	var root *x509.Certificate
	for _, f := range []string{"root.pem", "root-x2.pem"} {
		if r := harness.ReadChain(t, filepath.Join(ca.Dir, "ca", f))[0]; inter.CheckSignatureFrom(r) == nil {
			root = r
		}
	}
	if root == nil || !strings.HasPrefix(url, "http://") || !strings.HasSuffix(url, "/crl/"+hex.EncodeToString(root.SubjectKeyId)) {
		t.Fatalf("%s names the CRL %s; want its root's", inter.Subject.CommonName, url)
	}
	if err := crl.CheckSignatureFrom(root); err != nil {
		t.Fatalf("the CRL at %s is not signed by %s: %v", url, root.Subject.CommonName, err)
	}
	if !time.Now().Before(crl.NextUpdate) {
		t.Fatalf("the CRL at %s expired at %s", url, crl.NextUpdate)
	}
	for _, e := range crl.RevokedCertificateEntries {
		if e.SerialNumber.Cmp(inter.SerialNumber) == 0 {
			t.Fatalf("the CRL at %s lists %s as revoked", url, inter.Subject.CommonName)
		}
	}
}

// wantCRLOf waits for the CRL at cert's distribution point, signed by its
// issuer.
func wantCRLOf(t *testing.T, ca *CA, cert *x509.Certificate) {
	t.Helper()
	client := ca.HTTPClient()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get(cert.CRLDistributionPoints[0])
		if err == nil {
			der, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				crl, err := x509.ParseRevocationList(der)
				if err != nil {
					t.Fatalf("the CRL at %s does not parse: %v", cert.CRLDistributionPoints[0], err)
				}
				harness.CheckCRLSignature(t, client, crl, cert)
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no CRL at %s within 30s", cert.CRLDistributionPoints[0])
		}
		time.Sleep(200 * time.Millisecond)
	}
}
