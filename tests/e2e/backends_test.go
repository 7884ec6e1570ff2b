package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	xacme "golang.org/x/crypto/acme"

	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/tests/harness"
	"github.com/hallmark-ca/hallmark/tests/pebble"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// softHSM initialises a SoftHSM2 token in a temporary directory and points
// this process and its children (the worker) at it. It returns the token
// directory, which a test may take away.
func softHSM(t *testing.T) (module, tokenDir string) {
	t.Helper()
	requireTool(t, "softhsm2-util", "apt-get install softhsm2")
	module = "/usr/lib/softhsm/libsofthsm2.so"
	if _, err := os.Stat(module); err != nil {
		requireTool(t, "libsofthsm2.so", "apt-get install softhsm2")
	}
	dir := t.TempDir()
	tokenDir = filepath.Join(dir, "tokens")
	if err := os.Mkdir(tokenDir, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "softhsm2.conf")
	if err := os.WriteFile(conf, []byte("directories.tokendir = "+tokenDir+"\nobjectstore.backend = file\nlog.level = ERROR\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SOFTHSM2_CONF", conf)
	t.Setenv("HALLMARK_E2E_PIN", "246810")
	out, err := exec.Command("softhsm2-util", "--init-token", "--free", "--label", "hallmark-e2e", "--pin", "246810", "--so-pin", "135790").CombinedOutput()
	if err != nil {
		t.Fatalf("softhsm2-util --init-token: %v\n%s", err, out)
	}
	return module, tokenDir
}

// buildHook builds the custom backend's test hook (testdata/hook) and a
// local CA for it to sign with.
func buildHook(t *testing.T) (bin, caDir string) {
	t.Helper()
	dir := t.TempDir()
	bin = filepath.Join(dir, "hook")
	cmd := exec.Command("go", "build", "-o", bin, "./testdata/hook")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the test hook: %v\n%s", err, out)
	}
	caDir = filepath.Join(dir, "hook-ca")
	if _, err := signer.InitLocal(caDir, signer.CAOptions{Name: "Hook Upstream", URLBase: "http://ca.test"}); err != nil {
		t.Fatal(err)
	}
	return bin, caDir
}

// acmeAccount registers a new account at ca with x/crypto/acme, which can
// choose a profile (draft-ietf-acme-profiles).
func acmeAccount(t *testing.T, ca *CA) *xacme.Client {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	c := &xacme.Client{Key: key, DirectoryURL: ca.BaseURL + "/directory", HTTPClient: ca.HTTPClient()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Register(ctx, &xacme.Account{}, xacme.AcceptTOS); err != nil {
		t.Fatalf("registering an account: %v", err)
	}
	return c
}

// obtain gets a certificate for name under profile over dns-01 (answered
// in the test's DNS server), returning the chain (DER, leaf first).
func obtain(ctx context.Context, ca *CA, c *xacme.Client, profile, name string) ([][]byte, *ecdsa.PrivateKey, error) {
	o, err := c.AuthorizeOrder(ctx, xacme.DomainIDs(name), xacme.WithOrderIssuanceProfile(xacme.ProfileName(profile)))
	if err != nil {
		return nil, nil, fmt.Errorf("newOrder: %w", err)
	}
	orderURL := o.URI
	for _, u := range o.AuthzURLs {
		z, err := c.GetAuthorization(ctx, u)
		if err != nil {
			return nil, nil, err
		}
		if z.Status == xacme.StatusValid {
			continue
		}
		for _, ch := range z.Challenges {
			if ch.Type != "dns-01" {
				continue
			}
			rec, err := c.DNS01ChallengeRecord(ch.Token)
			if err != nil {
				return nil, nil, err
			}
			ca.DNS.SetTXT("_acme-challenge."+z.Identifier.Value, rec)
			if _, err := c.Accept(ctx, ch); err != nil {
				return nil, nil, fmt.Errorf("accepting dns-01: %w", err)
			}
		}
		if _, err := c.WaitAuthorization(ctx, u); err != nil {
			return nil, nil, fmt.Errorf("authorization: %w", err)
		}
	}
	if _, err := c.WaitOrder(ctx, orderURL); err != nil {
		return nil, nil, fmt.Errorf("waiting for ready: %w", err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	csr, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{DNSNames: []string{name}}, key)
	chain, _, err := c.CreateOrderCert(ctx, o.FinalizeURL, csr, true)
	var ae *xacme.Error
	if err != nil && !errors.As(err, &ae) {
		fo, werr := c.WaitOrder(ctx, orderURL)
		if werr != nil {
			return nil, nil, fmt.Errorf("waiting for the certificate: %w", werr)
		}
		chain, err = c.FetchCert(ctx, fo.CertURL, true)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("finalize: %w", err)
	}
	return chain, key, nil
}

func verifyTo(t *testing.T, chain [][]byte, rootPEM []byte, name string) *x509.Certificate {
	t.Helper()
	leaf, err := x509.ParseCertificate(chain[0])
	if err != nil {
		t.Fatal(err)
	}
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	if !roots.AppendCertsFromPEM(rootPEM) {
		t.Fatal("no root PEM")
	}
	for _, der := range chain[1:] {
		c, _ := x509.ParseCertificate(der)
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, Intermediates: inter}); err != nil {
		t.Fatalf("%s: the chain does not verify to its root: %v", name, err)
	}
	return leaf
}

// waitInCRL polls the CRL distribution point until serial is listed.
func waitInCRL(t *testing.T, ca *CA, leaf *x509.Certificate) {
	t.Helper()
	client := ca.HTTPClient()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := client.Get(leaf.CRLDistributionPoints[0])
		if err == nil {
			der, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if crl, err := x509.ParseRevocationList(der); err == nil {
				for _, e := range crl.RevokedCertificateEntries {
					if e.SerialNumber.Cmp(leaf.SerialNumber) == 0 {
						harness.CheckCRLSignature(t, client, crl, leaf)
						return
					}
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("serial %x did not appear in the CRL within 30s", leaf.SerialNumber)
}

// workerReady asks the worker's /readyz.
func workerReady(t *testing.T, ca *CA) (int, string) {
	t.Helper()
	cfg, _ := os.ReadFile(ca.Config)
	m := regexp.MustCompile(`health_listen = "([^"]+)"`).FindSubmatch(cfg)
	if m == nil {
		t.Fatal("no worker.health_listen in the test configuration")
	}
	resp, err := http.Get("http://" + string(m[1]) + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestBackendsIssueRevoke drives the real binaries through all four
// backends, each chosen by newOrder's profile: local (ca.dir), pkcs11 (a
// real SoftHSM2 token), relay (a real Pebble) and custom (a real hook
// executable). Each certificate verifies to its own root and is revoked:
// local and pkcs11 serials appear in the worker-signed CRL; relay and custom
// revocations go through signer_revoke to the backend while the request
// waits. Then the token goes away mid-run: the order's job is retried, the
// worker reports not ready, and the order becomes valid once the token is
// back.
func TestBackendsIssueRevoke(t *testing.T) {
	module, tokenDir := softHSM(t)
	up := pebble.Start(t)
	hook, hookCA := buildHook(t)
	extra := fmt.Sprintf(`
[profiles.hsm]
description = "3-day certificate signed on the HSM"
backend = "pkcs11"
signer = "softhsm"
validity_hours = 72
key_types = ["p256", "rsa2048"]
challenges = ["dns-01"]
key_usages = ["digitalSignature"]
ext_key_usages = ["serverAuth"]

[profiles.hooks]
description = "signed by the operator's hooks"
backend = "custom"
signer = "hooks"
validity_hours = 240
key_types = ["p256", "rsa2048"]
challenges = ["dns-01"]

[profiles.upstream]
description = "relayed to the upstream CA"
backend = "relay"
signer = "pebble"
validity_hours = 2160
key_types = ["p256", "rsa2048"]
challenges = ["dns-01"]

[backends.softhsm]
type = "pkcs11"
module = %q
token_label = "hallmark-e2e"
pin_env = "HALLMARK_E2E_PIN"
key_label = "e2e-issuer"
cert = "ca/softhsm.pem"

[backends.hooks]
type = "custom"
issue_command = [%q, %q, "issue"]
revoke_command = [%q, %q, "revoke"]
crl_command = [%q, %q, "crl"]
timeout_ms = 5000

[backends.pebble]
type = "relay"
directory_url = %q
ca_cert = %q
account_key = "relay-account.key"
contact = ["ops@hallmark.test"]
timeout_ms = 6000
`, module, hook, hookCA, hook, hookCA, hook, hookCA, up.DirectoryURL, up.CACert)
	dbURL := testdb.SQLite(t)
	ca := startCA(t, dbURL, extra)
	// The HSM key is made after the root exists; the worker mounts it when
	// it starts again. It is stopped, not killed: a worker killed while
	// signing its start-up CRL keeps that issuer's CRL lease until
	// rescue_after (15 s here; TestCRLAfterWorkerDiesSigning), and the
	// retries' backoff can then run past what waitInCRL waits below.
	out := ca.Run("hallmark-worker", "--config", ca.Config, "ca", "init", "--pkcs11", "softhsm", "--key-type", "p256")
	t.Log(strings.TrimSpace(out))
	ca.Stop("worker")
	ca.Start("worker")

	localRoot, _ := os.ReadFile(ca.Root)
	hookRoot, _ := os.ReadFile(filepath.Join(hookCA, signer.RootCertFile))
	c := acmeAccount(t, ca)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	for _, tc := range []struct {
		profile string
		root    []byte // nil for the relay: Pebble's issuer is checked by name
		crl     bool
	}{
		{"default", localRoot, true},
		{"hsm", localRoot, true},
		{"hooks", hookRoot, false},
		{"upstream", nil, false},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			name := tc.profile + ".backends.test"
			chain, _, err := obtain(ctx, ca, c, tc.profile, name)
			if err != nil {
				t.Fatalf("obtaining a %s certificate: %v", tc.profile, err)
			}
			var leaf *x509.Certificate
			if tc.root != nil {
				leaf = verifyTo(t, chain, tc.root, name)
			} else {
				leaf, _ = x509.ParseCertificate(chain[0])
				if !strings.Contains(leaf.Issuer.CommonName, "Pebble") {
					t.Fatalf("relay certificate issued by %q, want Pebble", leaf.Issuer.CommonName)
				}
			}
			if tc.profile == "hsm" && leaf.NotAfter.Sub(leaf.NotBefore) > 72*time.Hour {
				t.Fatalf("hsm profile validity %s, want ≤ 72h", leaf.NotAfter.Sub(leaf.NotBefore))
			}
			if err := c.RevokeCert(ctx, nil, chain[0], xacme.CRLReasonSuperseded); err != nil {
				t.Fatalf("revoking the %s certificate: %v", tc.profile, err)
			}
			if tc.crl {
				waitInCRL(t, ca, leaf)
			}
			if tc.profile == "hooks" {
				if b, err := os.ReadFile(filepath.Join(hookCA, "revoked-"+signer.SerialHex(leaf.SerialNumber))); err != nil || string(b) != "4" {
					t.Fatalf("the revoke hook did not record reason 4: %q, %v", b, err)
				}
			}
			// The revocation is recorded for every backend (for relay and
			// custom by the signer_revoke job the request waited on).
			st, err := open.Open(ctx, dbURL, 2)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			row, err := st.Store.CertificateBySerial(ctx, signer.SerialHex(leaf.SerialNumber))
			if err != nil || row.RevokedAt == nil || row.RevocationReason != 4 {
				t.Fatalf("the store's row after revoking the %s certificate: %+v, %v", tc.profile, row, err)
			}
		})
	}

	// The hooks backend's crl_command signs its CRL, which the frontend
	// serves at /crl/custom:hooks (the worker signs one at start).
	t.Run("hooks CRL", func(t *testing.T) {
		hookIss, err := signer.LoadLocal(hookCA)
		if err != nil {
			t.Fatal(err)
		}
		var body []byte
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			resp, err := ca.HTTPClient().Get(ca.BaseURL + "/crl/custom:hooks")
			if err != nil {
				t.Fatal(err)
			}
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
			body = nil
		}
		crl, err := x509.ParseRevocationList(body)
		if err != nil {
			t.Fatalf("/crl/custom:hooks: %v (%d bytes)", err, len(body))
		}
		if err := crl.CheckSignatureFrom(hookIss.Cert); err != nil {
			t.Fatalf("the hooks backend's CRL is not signed by the hook's CA: %v", err)
		}
	})

	t.Run("token goes away mid-run", func(t *testing.T) {
		if code, body := workerReady(t, ca); code != 200 {
			t.Fatalf("worker not ready before the fault: %d %s", code, body)
		}
		away := tokenDir + ".away"
		if err := os.Rename(tokenDir, away); err != nil {
			t.Fatal(err)
		}
		type result struct {
			chain [][]byte
			err   error
		}
		done := make(chan result, 1)
		go func() {
			chain, _, err := obtain(ctx, ca, c, "hsm", "fault.backends.test")
			done <- result{chain, err}
		}()
		deadline := time.Now().Add(20 * time.Second)
		for {
			code, body := workerReady(t, ca)
			if code == http.StatusServiceUnavailable {
				t.Logf("worker /readyz while the token is away: %d %s", code, strings.TrimSpace(body))
				break
			}
			if time.Now().After(deadline) {
				os.Rename(away, tokenDir)
				t.Fatalf("the worker stayed ready with the token gone: %d %s", code, body)
			}
			time.Sleep(200 * time.Millisecond)
		}
		// Let the signing job fail at least once against the missing token.
		time.Sleep(4 * time.Second)
		select {
		case r := <-done:
			os.Rename(away, tokenDir)
			t.Fatalf("the order finished while the token was away: %v", r.err)
		default:
		}
		if err := os.Rename(away, tokenDir); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if r.err != nil {
			t.Fatalf("the order did not recover when the token came back: %v", r.err)
		}
		verifyTo(t, r.chain, localRoot, "fault.backends.test")
		if code, body := workerReady(t, ca); code != 200 {
			t.Fatalf("worker not ready after the token came back: %d %s", code, body)
		}
		wlog, _ := os.ReadFile(filepath.Join(ca.Dir, "worker.log"))
		if !strings.Contains(string(wlog), "CKR_") {
			t.Errorf("the worker log does not show the PKCS#11 failure that was retried")
		}
	})
}
