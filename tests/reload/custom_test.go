package reload

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/tests/harness"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// TestReloadCustomBackend: a custom backend's hooks change (they now sign
// with another CA); the reload builds the backend again and the next
// certificate comes from the new CA. Hooks that do not exist refuse the
// reload and the running ones keep issuing.
func TestReloadCustomBackend(t *testing.T) {
	dir := t.TempDir()
	hook := filepath.Join(dir, "hook")
	if out, err := exec.Command("go", "build", "-o", hook, "../e2e/testdata/hook").CombinedOutput(); err != nil {
		t.Fatalf("building the e2e test hook: %v\n%s", err, out)
	}
	for _, n := range []string{"A", "B"} {
		if _, err := signer.InitLocal(filepath.Join(dir, "hook-ca-"+n), "Hook CA "+n); err != nil {
			t.Fatal(err)
		}
	}
	caA, caB := filepath.Join(dir, "hook-ca-A"), filepath.Join(dir, "hook-ca-B")
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
timeout_ms = 5000
`, hook, caA, hook, caA)
	harness.RequireTool(t, "lego", "apt-get install lego")
	ca := harness.StartCA(t, testdb.SQLite(t), harness.Options{Top: `default_profile = "hooks"`, Tables: tables})
	issuedBy := func(name, prefix string) {
		t.Helper()
		if c := order(t, ca, name); !strings.HasPrefix(c.Issuer.CommonName, prefix) {
			t.Fatalf("%s was issued by %q, want %s…", name, c.Issuer.CommonName, prefix)
		}
	}
	issuedBy("before.hooks.test", "Hook CA A")

	edit(t, ca, func(s string) string { return strings.ReplaceAll(s, caA, caB) })
	hangup(t, ca)
	if a, r := outcomes(ca, "worker"); a != 1 || r != 0 {
		t.Fatalf("worker: %d applied, %d refused; want 1 applied\n%s", a, r, harness.Tail(ca.Log("worker"), 3000))
	}
	issuedBy("after.hooks.test", "Hook CA B")

	edit(t, ca, func(s string) string { return strings.ReplaceAll(s, fmt.Sprintf("%q", hook), fmt.Sprintf("%q", hook+"-gone")) })
	hangup(t, ca)
	if a, r := outcomes(ca, "worker"); a != 1 || r != 1 {
		t.Fatalf("worker: %d applied, %d refused; want hooks that do not exist refused\n%s", a, r, harness.Tail(ca.Log("worker"), 3000))
	}
	if log := ca.Log("worker"); !strings.Contains(log, "hook-gone") {
		t.Fatalf("the refusal does not name the missing hook:\n%s", harness.Tail(log, 3000))
	}
	issuedBy("refused.hooks.test", "Hook CA B")
}
