package custom_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/signer/custom"
	"github.com/hallmark-ca/hallmark/signer/signerconf"
)

// optionalHook is the test binary as an env, crl or renewal_info hook.
func optionalHook(mode, dir string, in []byte) int {
	switch mode {
	case "env":
		// The testing package sets GODEBUG=rsa1024min=0 in its own
		// process (this hook) at start; it was not passed.
		env := slices.DeleteFunc(os.Environ(), func(v string) bool { return v == "GODEBUG=rsa1024min=0" })
		b, _ := json.Marshal(env)
		_ = os.WriteFile(filepath.Join(dir, "env.json"), b, 0o600)
		fmt.Println(`{"status":"revoked"}`)
	case "crl", "crl-short":
		var req custom.CRLRequest
		if err := json.Unmarshal(in, &req); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		iss, err := signer.LoadLocal(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		var entries []signer.RevokedEntry
		for _, e := range req.Revoked {
			serial, _ := new(big.Int).SetString(e.Serial, 16)
			entries = append(entries, signer.RevokedEntry{Serial: serial, RevokedAt: e.RevokedAt, Reason: e.Reason})
		}
		if mode == "crl-short" && len(entries) > 0 {
			entries = entries[1:] // a hook that loses a revocation
		}
		der, err := iss.SignCRL(req.Number, req.ThisUpdate, req.NextUpdate, entries, req.DistributionPoint)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		_ = json.NewEncoder(os.Stdout).Encode(custom.Response{CRL: string(pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der}))})
	case "renewal-info":
		var req custom.RenewalInfoRequest
		if err := json.Unmarshal(in, &req); err != nil || !strings.Contains(req.Certificate, "BEGIN CERTIFICATE") {
			return 2
		}
		start := time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)
		_ = json.NewEncoder(os.Stdout).Encode(custom.Response{SuggestedWindow: &custom.Window{Start: start, End: start.Add(time.Hour)},
			ExplanationURL: "https://ca.example/incident/" + req.Serial, RetryAfter: 600})
	}
	return 0
}

// envHook is the test binary itself as a hook, its mode and CA directory
// given by the configured environment (no wrapper script, which would
// add a shell's variables).
func envHook(t *testing.T, mode string, c signerconf.Custom) (*custom.Backend, string) {
	t.Helper()
	dir := t.TempDir()
	if _, err := signer.InitLocal(dir, signer.CAOptions{Name: "Hook CA", URLBase: "http://ca.test"}); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c.IssueCommand, c.RevokeCommand = []string{self}, []string{self}
	if c.Env == nil {
		c.Env = map[string]string{}
	}
	c.Env["HALLMARK_TEST_HOOK"], c.Env["HALLMARK_TEST_HOOK_CA"] = mode, dir
	b, err := custom.New(custom.Config{Name: "hooks", Timeout: 10 * time.Second, Custom: c})
	if err != nil {
		t.Fatal(err)
	}
	return b, dir
}

// TestHookEnvironmentIsOnlyConfigured: a hook sees the names env and
// pass_env give it and HALLMARK_BACKEND, never the rest of the worker's
// environment (its database URL).
func TestHookEnvironmentIsOnlyConfigured(t *testing.T) {
	t.Setenv("HALLMARK_TEST_SECRET_DB", "postgres://hallmark:secret@db/hallmark")
	t.Setenv("HALLMARK_TEST_PASSED", "passed-through")
	b, dir := envHook(t, "env", signerconf.Custom{Env: map[string]string{"HTTPS_PROXY": "http://127.0.0.1:3128"},
		PassEnv: []string{"HALLMARK_TEST_PASSED", "HALLMARK_TEST_UNSET"}})
	if err := b.Revoke(context.Background(), "01", []byte{0x30}, 0); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "env.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	want := []string{"HALLMARK_BACKEND=hooks", "HALLMARK_TEST_HOOK=env", "HALLMARK_TEST_HOOK_CA=" + dir,
		"HALLMARK_TEST_PASSED=passed-through", "HTTPS_PROXY=http://127.0.0.1:3128"}
	if !slices.Equal(got, want) {
		t.Fatalf("the hook's environment is\n%q\nwant exactly\n%q", got, want)
	}
}

func TestCRLHook(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC().Truncate(time.Second)
	entries := []signer.RevokedEntry{
		{Serial: big.NewInt(0x1234), RevokedAt: now.Add(-time.Hour), Reason: 1},
		{Serial: big.NewInt(0xabcdef), RevokedAt: now.Add(-time.Minute), Reason: 4},
	}
	b, dir := envHookCRL(t, "crl")
	if !b.SignsCRLs() {
		t.Fatal("a backend with crl_command does not sign CRLs")
	}
	der, err := b.SignCRL(42, now, now.Add(24*time.Hour), entries, "http://127.0.0.1:1/crl/custom:hooks")
	if err != nil {
		t.Fatalf("SignCRL: %v", err)
	}
	crl, err := x509.ParseRevocationList(der)
	if err != nil {
		t.Fatal(err)
	}
	iss, err := signer.LoadLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := crl.CheckSignatureFrom(iss.Cert); err != nil || crl.Number.Int64() != 42 || len(crl.RevokedCertificateEntries) != 2 {
		t.Fatalf("the hook's CRL: signature %v, number %v, %d entries; want the hook CA's, 42, 2", err, crl.Number, len(crl.RevokedCertificateEntries))
	}

	short, _ := envHookCRL(t, "crl-short")
	if _, err := short.SignCRL(43, now, now.Add(24*time.Hour), entries, "http://127.0.0.1:1/crl/custom:hooks"); err == nil || !strings.Contains(err.Error(), "left revoked serial 1234 off") {
		t.Fatalf("a CRL missing a revocation: %v, want it refused", err)
	}
	if none, _ := envHook(t, "crl", signerconf.Custom{}); none.SignsCRLs() {
		t.Fatal("a backend without crl_command signs CRLs")
	}
}

func envHookCRL(t *testing.T, mode string) (*custom.Backend, string) {
	t.Helper()
	self, _ := os.Executable()
	return envHook(t, mode, signerconf.Custom{CRLCommand: []string{self}})
}

func TestRenewalInfoHook(t *testing.T) {
	t.Parallel()
	self, _ := os.Executable()
	b, _ := envHook(t, "issue", signerconf.Custom{RenewalInfoCommand: []string{self}})
	r, csr := order(t, "ari.hook.example.test")
	issued, err := b.Issue(context.Background(), r, csr)
	if err != nil {
		t.Fatal(err)
	}
	ari, _ := envHook(t, "renewal-info", signerconf.Custom{RenewalInfoCommand: []string{self}})
	if ari.RenewalInfoPerRun() <= 0 {
		t.Fatal("a backend with renewal_info_command asks about no certificates")
	}
	info, err := ari.RenewalInfo(context.Background(), issued.DER)
	if err != nil {
		t.Fatalf("RenewalInfo: %v", err)
	}
	start := time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)
	if !info.Start.Equal(start) || !info.End.Equal(start.Add(time.Hour)) || info.RetryAfter != 10*time.Minute ||
		info.ExplanationURL != "https://ca.example/incident/"+issued.SerialHex {
		t.Fatalf("RenewalInfo = %+v, want the hook's window, explanation and retry", info)
	}
	if none, _ := envHook(t, "renewal-info", signerconf.Custom{}); none.RenewalInfoPerRun() != 0 {
		t.Fatal("a backend without renewal_info_command asks about certificates")
	}
}
