package custom_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/signer/custom"
	"github.com/hallmark-ca/hallmark/signer/signerconf"
)

// When HALLMARK_TEST_HOOK is set, this test binary is the hook: a real
// executable that reads the JSON request on stdin and signs with a local CA
// in HALLMARK_TEST_HOOK_CA (or revokes by writing a file there).
func TestMain(m *testing.M) {
	if mode := os.Getenv("HALLMARK_TEST_HOOK"); mode != "" {
		os.Exit(hook(mode))
	}
	os.Exit(m.Run())
}

func hook(mode string) int {
	fmt.Fprintln(os.Stderr, "hook", mode, "running")
	in, _ := io.ReadAll(os.Stdin)
	dir := os.Getenv("HALLMARK_TEST_HOOK_CA")
	switch mode {
	case "issue", "issue-then-hang":
		var req custom.IssueRequest
		if err := json.Unmarshal(in, &req); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		blk, _ := pem.Decode([]byte(req.CSR))
		csr, err := x509.ParseCertificateRequest(blk.Bytes)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		// What the contract asks of a hook whose CA keeps state: the
		// certificate issued earlier for the same order_id, not a second.
		record := filepath.Join(dir, "issued-"+req.OrderID+".pem")
		if chain, err := os.ReadFile(record); req.OrderID != "" && err == nil {
			json.NewEncoder(os.Stdout).Encode(custom.Response{CertificateChain: string(chain)})
			return 0
		}
		if strings.HasPrefix(req.Identifiers[0].Value, "refuse.") {
			json.NewEncoder(os.Stdout).Encode(map[string]any{"error": map[string]string{"type": "rejectedIdentifier", "detail": "policy says no"}})
			return 0
		}
		iss, err := signer.LoadLocal(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		var names []acme.Identifier
		for _, id := range req.Identifiers {
			names = append(names, acme.Identifier{Type: acme.IdentifierType(id.Type), Value: id.Value})
		}
		if strings.HasPrefix(req.Identifiers[0].Value, "liar.") {
			names = append(names, acme.Identifier{Type: acme.IdentifierDNS, Value: "extra.example.test"})
		}
		issued, err := iss.Issue(context.Background(), signer.Request{
			Profile:   profile.Profile{ValidityHours: req.ValidityHours, KeyUsages: []string{"digitalSignature"}, ExtKeyUsages: []string{"serverAuth"}},
			Names:     names,
			PublicKey: csr.PublicKey,
			IssuerURL: "http://127.0.0.1:1/issuer", CRLURL: "http://127.0.0.1:1/crl",
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		if req.OrderID != "" {
			os.WriteFile(record, issued.ChainPEM, 0o600)
		}
		if mode == "issue-then-hang" {
			time.Sleep(10 * time.Second) // issued, then killed by the timeout
		}
		json.NewEncoder(os.Stdout).Encode(custom.Response{CertificateChain: string(issued.ChainPEM)})
	case "revoke":
		var req custom.RevokeRequest
		if err := json.Unmarshal(in, &req); err != nil {
			return 2
		}
		os.WriteFile(filepath.Join(dir, "revoked-"+req.Serial), []byte(fmt.Sprint(req.Reason)), 0o600)
		fmt.Println(`{"status":"revoked"}`)
	case "env", "crl", "crl-short", "renewal-info":
		return optionalHook(mode, dir, in) // optional_test.go
	case "fail":
		fmt.Fprintln(os.Stderr, "upstream CA is down: connection refused")
		return 3
	case "slow":
		time.Sleep(10 * time.Second)
	case "garbage":
		fmt.Println("certificate: yes")
	}
	return 0
}

func backend(t *testing.T, mode string, timeout time.Duration) (*custom.Backend, string) {
	t.Helper()
	dir := t.TempDir()
	if _, err := signer.InitLocal(dir, signer.CAOptions{Name: "Hook CA", URLBase: "http://ca.test"}); err != nil {
		t.Fatal(err)
	}
	b, err := custom.New(custom.Config{Name: "hooks", Timeout: timeout,
		Custom: signerconf.Custom{IssueCommand: []string{hookScript(t, dir, mode)}, RevokeCommand: []string{hookScript(t, dir, "revoke")}}})
	if err != nil {
		t.Fatal(err)
	}
	return b, dir
}

// hookScript installs the test binary as a hook of mode over the hook CA
// in dir. The hook's own environment selects its mode: a wrapper script,
// as an operator would install an executable.
func hookScript(t *testing.T, dir, mode string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "hook-"+mode)
	body := fmt.Sprintf("#!/bin/sh\nHALLMARK_TEST_HOOK=%s HALLMARK_TEST_HOOK_CA=%s exec %s \"$@\"\n", mode, dir, self)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

func order(t *testing.T, names ...string) (signer.Request, *x509.CertificateRequest) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{DNSNames: names}, key)
	if err != nil {
		t.Fatal(err)
	}
	csr, _ := x509.ParseCertificateRequest(der)
	var ids []acme.Identifier
	for _, n := range names {
		ids = append(ids, acme.Identifier{Type: acme.IdentifierDNS, Value: n})
	}
	return signer.Request{Profile: profile.Profile{ValidityHours: 48}, ProfileName: "hooks", Names: ids, PublicKey: key.Public()}, csr
}

func TestIssueAndRevokeThroughHooks(t *testing.T) {
	t.Parallel()
	b, dir := backend(t, "issue", 10*time.Second)
	r, csr := order(t, "hook.example.test", "www.hook.example.test")
	issued, err := b.Issue(context.Background(), r, csr)
	if err != nil {
		t.Fatalf("Issue: %v", err)
	}
	leaf, err := x509.ParseCertificate(issued.DER)
	if err != nil || len(leaf.DNSNames) != 2 {
		t.Fatalf("issued %v, %v", leaf, err)
	}
	if got := leaf.NotAfter.Sub(leaf.NotBefore); got > 48*time.Hour {
		t.Fatalf("validity %s, want the profile's 48h passed to the hook", got)
	}
	if err := b.Revoke(context.Background(), issued.SerialHex, issued.DER, 4); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "revoked-"+issued.SerialHex)); err != nil || string(got) != "4" {
		t.Fatalf("the revoke hook saw %q, %v; want reason 4", got, err)
	}
}

func TestHookOutcomes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, mode, host string
		timeout          time.Duration
		unavailable      bool             // retried
		problem          acme.ProblemType // a verdict
		inErr            string
	}{
		{"refusal is a verdict", "issue", "refuse.example.test", 10 * time.Second, false, acme.ProblemRejectedIdentifier, "policy says no"},
		{"a certificate for other names is refused", "issue", "liar.example.test", 10 * time.Second, false, acme.ProblemServerInternal, "extra.example.test"},
		{"non-zero exit is retried with stderr", "fail", "a.example.test", 10 * time.Second, true, "", "connection refused"},
		{"timeout kills and retries", "slow", "a.example.test", 300 * time.Millisecond, true, "", "ran longer than 300ms"},
		{"garbage output is retried", "garbage", "a.example.test", 10 * time.Second, true, "", "no valid JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, _ := backend(t, tc.mode, tc.timeout)
			r, csr := order(t, tc.host)
			start := time.Now()
			_, err := b.Issue(context.Background(), r, csr)
			if err == nil {
				t.Fatal("Issue succeeded")
			}
			if time.Since(start) > 5*time.Second {
				t.Fatalf("took %s: the timeout did not kill the hook", time.Since(start))
			}
			if got := errors.Is(err, signer.ErrUnavailable); got != tc.unavailable {
				t.Fatalf("ErrUnavailable = %v, want %v: %v", got, tc.unavailable, err)
			}
			var ae *acme.Error
			if tc.problem != "" && (!errors.As(err, &ae) || ae.Problem.Type != tc.problem) {
				t.Fatalf("error %v, want problem %s", err, tc.problem)
			}
			if !strings.Contains(err.Error(), tc.inErr) && (ae == nil || !strings.Contains(ae.Problem.Detail, tc.inErr)) {
				t.Fatalf("error %q does not mention %q", err, tc.inErr)
			}
		})
	}
}

// scriptBackend is a backend whose issue and revoke hooks are one shell
// script with the given body.
func scriptBackend(t *testing.T, body string, timeout time.Duration) *custom.Backend {
	t.Helper()
	script := filepath.Join(t.TempDir(), "hook.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ncat >/dev/null\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := custom.New(custom.Config{Name: "script", Timeout: timeout,
		Custom: signerconf.Custom{IssueCommand: []string{script}, RevokeCommand: []string{script}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHookOutputIsBounded: a hook that floods stdout and stderr costs the
// worker at most the 1 MiB a stream it keeps, and an answer that comes
// after more than that is not read. Before, the cap was bypassed (io.Copy
// used the embedded buffer's ReadFrom) and the worker held all of it.
// Not parallel: it measures the test binary's allocations.
func TestHookOutputIsBounded(t *testing.T) {
	b := scriptBackend(t, `head -c 67108864 /dev/zero | tr '\0' ' '
head -c 67108864 /dev/zero | tr '\0' 'e' >&2
echo '{"status":"revoked"}'
`, 30*time.Second)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := b.Revoke(context.Background(), "01", []byte{0x30, 0}, 4)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, signer.ErrUnavailable) || !strings.Contains(err.Error(), "more than 1048576 bytes on stdout") {
		t.Errorf("an answer after 64 MiB of stdout: %v, want the oversized output refused and retried", err)
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 16<<20 {
		t.Errorf("reading one hook's 128 MiB of output allocated %d MiB; it keeps 1 MiB a stream", grown>>20)
	}
}

// TestHookWithBackgroundChild: a hook that answers and exits 0 but leaves a
// child holding its stdout (a notification sent in the background) has
// done its work. Before, the run ended on exec's WaitDelay and counted as
// "could not run": the job was retried, revoking again or issuing a second
// certificate.
func TestHookWithBackgroundChild(t *testing.T) {
	t.Parallel()
	b := scriptBackend(t, `echo '{"status":"revoked"}'
sleep 3 &
exit 0
`, 10*time.Second)
	if err := b.Revoke(context.Background(), "01", []byte{0x30, 0}, 4); err != nil {
		t.Fatalf("the hook answered revoked and exited 0, but Revoke = %v", err)
	}
	// Exiting non-zero with a child left behind is still a failure.
	b = scriptBackend(t, `echo '{"status":"revoked"}'
sleep 3 &
exit 1
`, 10*time.Second)
	if err := b.Revoke(context.Background(), "01", []byte{0x30, 0}, 4); !errors.Is(err, signer.ErrUnavailable) {
		t.Fatalf("the hook exited 1: Revoke = %v, want ErrUnavailable", err)
	}
}

// TestHookRetryIsOneIssuance: a run killed by its timeout after the hook's
// CA issued is retried with the same order_id, so a hook that keeps what
// it issued by order_id (the contract's advice, which the test hook
// follows) hands back that certificate instead of issuing a second.
func TestHookRetryIsOneIssuance(t *testing.T) {
	t.Parallel()
	hung, dir := backend(t, "issue-then-hang", 2*time.Second)
	r, csr := order(t, "retry.hook.example.test")
	r.OrderID = "order-retried"
	if _, err := hung.Issue(context.Background(), r, csr); !errors.Is(err, signer.ErrUnavailable) {
		t.Fatalf("the run killed by its timeout: %v, want signer.ErrUnavailable (retried)", err)
	}
	kept, err := os.ReadFile(filepath.Join(dir, "issued-"+r.OrderID+".pem"))
	if err != nil {
		t.Fatalf("the hook recorded no certificate under the order id it was given: %v", err)
	}
	// The retry, as a restarted worker makes it: the same hook CA, a
	// hook that answers.
	retry, err := custom.New(custom.Config{Name: "hooks", Timeout: 10 * time.Second,
		Custom: signerconf.Custom{IssueCommand: []string{hookScript(t, dir, "issue")}, RevokeCommand: []string{hookScript(t, dir, "revoke")}}})
	if err != nil {
		t.Fatal(err)
	}
	issued, err := retry.Issue(context.Background(), r, csr)
	if err != nil {
		t.Fatalf("the retry: %v", err)
	}
	blk, _ := pem.Decode(kept)
	if blk == nil || !bytes.Equal(blk.Bytes, issued.DER) {
		t.Errorf("the retry returned serial %s, not the certificate the killed run issued: the hook could not tell it was the same order", issued.SerialHex)
	}
}
