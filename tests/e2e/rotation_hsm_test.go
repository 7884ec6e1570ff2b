package e2e

import (
	"context"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/tests/harness"
)

// hsmRotationTables are a profile signed on a SoftHSM2 token (its issuer
// A made by `ca init --pkcs11`) and the token's backend.
func hsmRotationTables(module string) string {
	return fmt.Sprintf(`
[profiles.hsm]
description = "signed on the HSM"
backend = "pkcs11"
signer = "softhsm"
validity_hours = 72
key_types = ["p256", "rsa2048"]
challenges = ["http-01"]
identifier_types = ["dns"]

[backends.softhsm]
type = "pkcs11"
module = %q
token_label = "hallmark-e2e"
pin_env = "HALLMARK_E2E_PIN"
key_label = "e2e-issuer-a"
cert = "ca/softhsm.pem"
`, module)
}

// TestRotationPKCS11UnderLoad is issue 39's rotation for an issuer whose
// key is on a PKCS#11 token (a real SoftHSM2 one): a PKCS#11 profile
// issues from A; `hallmark issuers create --pkcs11` generates B's key on
// the token and the root signs B; `hallmark issuers rotate` switches the
// profile to B while a load of 300 issuances runs, none of which fails,
// with no worker restarted; lego's next certificate is B's, chaining to
// the root; a certificate of A, revoked, lands on A's CRL signed by A,
// and A signs no certificate after the rotation. A rotation of the token's
// profile to the issuer in ca.dir is refused.
func TestRotationPKCS11UnderLoad(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.Name, func(t *testing.T) {
			requireTool(t, "lego", "apt-get install lego")
			module, _ := softHSM(t)
			load := hallmarkLoad(t)
			ca := harness.StartCA(t, d.URL(t), harness.Options{Top: `default_profile = "hsm"`, Tables: hsmRotationTables(module),
				InitArgs: []string{"--pkcs11", "softhsm", "--key-type", "p256"}})
			a := readCert(t, filepath.Join(ca.Dir, "ca", "softhsm.pem"))
			oldID := hex.EncodeToString(a.SubjectKeyId)
			path := t.TempDir()
			http01 := fmt.Sprintf("127.0.0.1:%d", ca.HTTPPort)
			first := "first.hsm-rotate-" + d.Name + ".test"
			cert1, _ := legoFrom(t, ca, path, http01, first, oldID)
			if got := listIssuers(t, ca)[oldID]; got.State != "active" || len(got.Profiles) != 1 || got.Profiles[0] != "hsm" {
				t.Fatalf("the token's issuer A %s is listed as %+v; want active for hsm", oldID, got)
			}

			newID, label := createOnToken(t, ca)
			if _, err := os.Stat(filepath.Join(ca.Dir, "ca", "issuers", newID+".key")); err == nil {
				t.Fatalf("issuers create --pkcs11 wrote a key file for %s", newID)
			}
			refuseLocal(t, ca)

			atRotation := rotateUnderLoad(t, ca, load, http01, "hsm", oldID, newID)

			cert2, secondFile := legoFrom(t, ca, path, http01, "second.hsm-rotate-"+d.Name+".test", newID)
			chain := harness.ReadChain(t, secondFile)
			b := readCert(t, filepath.Join(ca.Dir, "ca", "issuers", newID+".pem"))
			if len(chain) < 2 || !chain[1].Equal(b) || cert2.CheckSignatureFrom(b) != nil {
				t.Fatalf("the second certificate's chain is not B's certificate")
			}
			harness.WantChainTo(t, secondFile, ca.Root, chain[1].Issuer.CommonName, "")
			// B, loaded by the running worker, signs its CRLs.
			wantCRLOf(t, ca, cert2)

			// The backend names B from now on: after a reload the worker
			// still signs A's CRLs, opening A by its record.
			reloadNaming(t, ca, "ca/issuers/"+newID+".pem", label)
			legoFrom(t, ca, path, http01, "third.hsm-rotate-"+d.Name+".test", newID)

			if out, err := lego(t, ca, path, "--domains", first, "revoke", "--reason", "4"); err != nil {
				t.Fatalf("lego revoke: %v\n%s", err, out)
			}
			if dp := cert1.CRLDistributionPoints[0]; !strings.HasSuffix(dp, "/crl/"+oldID) && !strings.Contains(dp, "/crl/"+oldID+"/") {
				t.Fatalf("the first certificate's CRL is %v, not A's", cert1.CRLDistributionPoints)
			}
			harness.WaitRevoked(t, ca.HTTPClient(), cert1, 4)
			wantSignedBy(t, ca, cert1.CRLDistributionPoints[0], a)

			end := listIssuers(t, ca)
			if end[oldID].Outstanding != atRotation[oldID].Outstanding {
				t.Fatalf("A signed %d certificates after the rotation", end[oldID].Outstanding-atRotation[oldID].Outstanding)
			}
			if end[newID].Outstanding < 3 {
				t.Fatalf("B signed %d certificates; want the load's after the rotation and lego's two", end[newID].Outstanding)
			}
			t.Logf("A %s: %d certificates, B %s: %d", oldID, end[oldID].Outstanding, newID, end[newID].Outstanding)
		})
	}
}

// legoFrom has lego get a certificate for name over http-01 and fails
// unless the issuer issuerID signed it; it returns it and its chain's file.
func legoFrom(t *testing.T, ca *CA, path, http01, name, issuerID string) (*x509.Certificate, string) {
	t.Helper()
	if out, err := lego(t, ca, path, "--domains", name, "--http", "--http.port", http01, "run"); err != nil {
		t.Fatalf("lego run %s: %v\n%s", name, err, out)
	}
	file := filepath.Join(path, "certificates", name+".crt")
	cert := readCert(t, file)
	if got := hex.EncodeToString(cert.AuthorityKeyId); got != issuerID {
		t.Fatalf("%s is signed by %s, want %s", name, got, issuerID)
	}
	return cert, file
}

// createOnToken runs `hallmark issuers create --pkcs11 softhsm` and returns
// the new issuer's id and its key's label, as the list shows them.
func createOnToken(t *testing.T, ca *CA) (id, label string) {
	t.Helper()
	out := ca.Run("hallmark", "--config", ca.Config, "issuers", "create", "--pkcs11", "softhsm",
		"--name", "Hallmark Development HSM Intermediate B", "--key-type", "p384")
	m := regexp.MustCompile(`created issuer ([0-9a-f]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("issuers create printed no issuer id:\n%s", out)
	}
	var rows []struct {
		ID       string `json:"id"`
		Backend  string `json:"backend"`
		KeyLabel string `json:"key_label"`
		State    string `json:"state"`
	}
	list := ca.Run("hallmark", "--config", ca.Config, "issuers", "list", "--json")
	if err := json.Unmarshal([]byte(list), &rows); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.ID == m[1] {
			if r.Backend != "softhsm" || !strings.HasPrefix(r.KeyLabel, "hallmark-issuer-") || r.State != "active" {
				t.Fatalf("the new issuer is listed as %+v; want active, its key on softhsm under a label of its own", r)
			}
			return r.ID, r.KeyLabel
		}
	}
	t.Fatalf("the new issuer %s is not listed:\n%s", m[1], list)
	return "", ""
}

// refuseLocal: the token's profile is not rotated to the issuer in ca.dir
// (the local profile's), whose key no token holds.
func refuseLocal(t *testing.T, ca *CA) {
	t.Helper()
	for id, r := range listIssuers(t, ca) {
		if len(r.Profiles) != 1 || r.Profiles[0] != "default" {
			continue
		}
		cmd := exec.Command(harness.Bin("hallmark"), "--config", ca.Config, "issuers", "rotate", "--profile", "hsm", id)
		cmd.Dir = ca.Dir
		if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "in ca.dir") {
			t.Fatalf("rotating hsm to the ca.dir issuer %s: %v\n%s; want a refusal", id, err, out)
		}
		return
	}
	t.Fatal("no issuer is listed for the local profile default")
}

// rotateUnderLoad runs a load of 300 issuances on profile, rotates it from
// oldID to newID once oldID has signed a few, and fails unless every
// issuance succeeded; it returns the issuers as listed after the rotation.
func rotateUnderLoad(t *testing.T, ca *CA, load, http01, profile, oldID, newID string) map[string]issuerListed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	before := listIssuers(t, ca)[oldID].Outstanding
	// 300: long enough to outlast the rotation and the workers' 1 s issuer
	// cache (SQLite issues 80 in under a second here).
	loadCmd := exec.CommandContext(ctx, load, "run", "--directory", ca.BaseURL+"/directory", "--ca-cert", ca.Root,
		"--concurrency", "4", "--count", "300", "--stall", "60s", "--http-listen", http01, "--dns-listen", "127.0.0.1:0")
	var loadOut strings.Builder
	loadCmd.Stdout, loadCmd.Stderr = &loadOut, &loadOut
	if err := loadCmd.Start(); err != nil {
		t.Fatal(err)
	}
	loaded := make(chan error, 1)
	go func() { loaded <- loadCmd.Wait() }()
	for listIssuers(t, ca)[oldID].Outstanding < before+5 {
		select {
		case err := <-loaded:
			t.Fatalf("the load ended before the rotation (%v):\n%s", err, loadOut.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	ca.Run("hallmark", "--config", ca.Config, "issuers", "rotate", "--profile", profile, newID)
	at := listIssuers(t, ca)
	if at[oldID].State != "retiring" || at[newID].State != "active" {
		t.Fatalf("after the rotation: A %+v, B %+v; want retiring and active", at[oldID], at[newID])
	}
	if err := <-loaded; err != nil {
		t.Fatalf("the load failed: %v\n%s", err, loadOut.String())
	}
	if !strings.Contains(loadOut.String(), "errors: none") || !strings.Contains(loadOut.String(), "issued 300 ") {
		t.Fatalf("not every issuance of the load succeeded across the rotation:\n%s", loadOut.String())
	}
	if after := listIssuers(t, ca)[newID].Outstanding; after == 0 {
		t.Fatalf("the load finished before the rotation took effect: B signed none of it\n%s", loadOut.String())
	}
	t.Logf("load: %s", strings.SplitN(loadOut.String(), "\n", 4)[2])
	return at
}

// wantSignedBy fails unless the CRL at url is issuer's: its authority key
// id and its signature.
func wantSignedBy(t *testing.T, ca *CA, url string, issuer *x509.Certificate) {
	t.Helper()
	resp, err := ca.HTTPClient().Get(url)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	crl, err := x509.ParseRevocationList(der)
	if err != nil {
		t.Fatalf("the CRL at %s: %v", url, err)
	}
	if hex.EncodeToString(crl.AuthorityKeyId) != hex.EncodeToString(issuer.SubjectKeyId) || crl.CheckSignatureFrom(issuer) != nil {
		t.Fatalf("the CRL at %s is not signed by %s", url, issuer.Subject.CommonName)
	}
}

// reloadNaming points [backends.softhsm] at the issuer of cert, its key
// labelled label, and has the worker reload its configuration.
func reloadNaming(t *testing.T, ca *CA, cert, label string) {
	t.Helper()
	b, err := os.ReadFile(ca.Config)
	if err != nil {
		t.Fatal(err)
	}
	next := strings.Replace(string(b), `key_label = "e2e-issuer-a"`, fmt.Sprintf("key_label = %q", label), 1)
	next = strings.Replace(next, `cert = "ca/softhsm.pem"`, fmt.Sprintf("cert = %q", cert), 1)
	if err := os.WriteFile(ca.Config, []byte(next), 0o644); err != nil {
		t.Fatal(err)
	}
	applied := func() int { return strings.Count(ca.Log("worker"), `msg="configuration reloaded"`) }
	before := applied()
	ca.Signal("worker", syscall.SIGHUP)
	for deadline := time.Now().Add(30 * time.Second); applied() == before; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) || strings.Contains(ca.Log("worker"), "configuration not reloaded") {
			t.Fatalf("the worker did not reload:\n%s", harness.Tail(ca.Log("worker"), 3000))
		}
	}
}
