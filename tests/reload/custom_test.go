package reload

import (
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/tests/harness"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// TestReloadCustomBackend: a custom backend's hooks change (they now sign
// with another CA); the reload builds the backend again and the next
// certificate comes from the new CA, while an issuance already running
// when the reload came is not failed: it finishes with the old hooks, and
// the reload does not wait for it. Hooks that do not exist refuse the
// reload and the running ones keep issuing.
func TestReloadCustomBackend(t *testing.T) {
	dir := t.TempDir()
	hook := filepath.Join(dir, "hook")
	if out, err := exec.Command("go", "build", "-o", hook, "../e2e/testdata/hook").CombinedOutput(); err != nil {
		t.Fatalf("building the e2e test hook: %v\n%s", err, out)
	}
	for _, n := range []string{"A", "B"} {
		if _, err := signer.InitLocal(filepath.Join(dir, "hook-ca-"+n), signer.CAOptions{Name: "Hook CA " + n, URLBase: "http://ca.test"}); err != nil {
			t.Fatal(err)
		}
	}
	caA, caB := filepath.Join(dir, "hook-ca-A"), filepath.Join(dir, "hook-ca-B")
	// The issue hook, slowed while dir/slow exists, says when it started.
	slow, started := filepath.Join(dir, "slow"), filepath.Join(dir, "started")
	issue := filepath.Join(dir, "issue.sh")
	script := fmt.Sprintf("#!/bin/sh\nif [ -e %q ]; then touch %q; sleep 3; fi\nexec %q \"$@\"\n", slow, started, hook)
	if err := os.WriteFile(issue, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	tables := profileTOML(100) + fmt.Sprintf(`
[profiles.hooks]
backend = "custom"
signer = "hooks"
validity_hours = 100
key_types = ["p256", "rsa2048"]
challenges = ["http-01"]
identifier_types = ["dns"]

[backends.hooks]
type = "custom"
issue_command = [%q, %q, "issue"]
revoke_command = [%q, %q, "revoke"]
timeout_ms = 6000
`, issue, caA, hook, caA)
	harness.RequireTool(t, "lego", "apt-get install lego")
	ca := harness.StartCA(t, testdb.SQLite(t), harness.Options{Top: `default_profile = "hooks"`, Tables: tables})
	issuedBy := func(name, prefix string) {
		t.Helper()
		if c := order(t, ca, name); !strings.HasPrefix(c.Issuer.CommonName, prefix) {
			t.Fatalf("%s was issued by %q, want %s…", name, c.Issuer.CommonName, prefix)
		}
	}
	issuedBy("before.hooks.test", "Hook CA A")

	if err := os.WriteFile(slow, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	type result struct {
		c   *x509.Certificate
		err error
	}
	straddling := make(chan result, 1)
	go func() {
		c, err := lego(t, ca, "straddle.hooks.test")
		straddling <- result{c, err}
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the issue hook never started\n%s", harness.Tail(ca.Log("worker"), 3000))
		}
	}
	edit(t, ca, func(s string) string { return strings.ReplaceAll(s, caA, caB) })
	hangup(t, ca) // while the issuance sleeps in the old hook
	if a, r := outcomes(ca, "worker"); a != 1 || r != 0 {
		t.Fatalf("worker: %d applied, %d refused; want 1 applied\n%s", a, r, harness.Tail(ca.Log("worker"), 3000))
	}
	if err := os.Remove(slow); err != nil {
		t.Fatal(err)
	}
	res := <-straddling
	if res.err != nil {
		t.Fatalf("the issuance running across the reload: %v", res.err)
	}
	if !strings.HasPrefix(res.c.Issuer.CommonName, "Hook CA A") {
		t.Fatalf("the issuance that started before the reload was issued by %q, want the old hooks' Hook CA A", res.c.Issuer.CommonName)
	}
	issuedBy("after.hooks.test", "Hook CA B")

	edit(t, ca, func(s string) string {
		return strings.ReplaceAll(s, fmt.Sprintf("%q", hook), fmt.Sprintf("%q", hook+"-gone"))
	})
	hangup(t, ca)
	if a, r := outcomes(ca, "worker"); a != 1 || r != 1 {
		t.Fatalf("worker: %d applied, %d refused; want hooks that do not exist refused\n%s", a, r, harness.Tail(ca.Log("worker"), 3000))
	}
	if log := ca.Log("worker"); !strings.Contains(log, "hook-gone") {
		t.Fatalf("the refusal does not name the missing hook:\n%s", harness.Tail(log, 3000))
	}
	issuedBy("refused.hooks.test", "Hook CA B")
}
