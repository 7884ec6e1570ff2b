package reload

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/tests/harness"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// softHSM initialises a SoftHSM2 token in a temporary directory and points
// this process and its children (the worker) at it.
func softHSM(t *testing.T) (module string) {
	t.Helper()
	harness.RequireTool(t, "softhsm2-util", "apt-get install softhsm2")
	module = "/usr/lib/softhsm/libsofthsm2.so"
	if _, err := os.Stat(module); err != nil {
		harness.RequireTool(t, "libsofthsm2.so", "apt-get install softhsm2")
	}
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.Mkdir(tokens, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "softhsm2.conf")
	if err := os.WriteFile(conf, []byte("directories.tokendir = "+tokens+"\nobjectstore.backend = file\nlog.level = ERROR\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SOFTHSM2_CONF", conf)
	t.Setenv("HALLMARK_RELOAD_PIN", "246810")
	out, err := exec.Command("softhsm2-util", "--init-token", "--free", "--label", "hallmark-reload", "--pin", "246810", "--so-pin", "135790").CombinedOutput()
	if err != nil {
		t.Fatalf("softhsm2-util --init-token: %v\n%s", err, out)
	}
	return module
}

// TestReloadPKCS11: a profile signed on a real SoftHSM2 token changes its
// validity; the reload opens the token again (a new login) and the next
// certificate, still signed on the token, has the new validity. A reload
// whose token cannot be opened (its PIN's variable unset) is refused whole
// and the token mounted before keeps signing.
func TestReloadPKCS11(t *testing.T) {
	module := softHSM(t)
	tables := profileTOML(100) + fmt.Sprintf(`
[profiles.hsm]
backend = "pkcs11"
signer = "softhsm"
validity_hours = 72
key_types = ["p256", "rsa2048"]
challenges = ["http-01"]
identifier_types = ["dns"]

[backends.softhsm]
type = "pkcs11"
module = %q
token_label = "hallmark-reload"
pin_env = "HALLMARK_RELOAD_PIN"
key_label = "reload-issuer"
cert = "ca/softhsm.pem"
`, module)
	harness.RequireTool(t, "lego", "apt-get install lego")
	ca := harness.StartCA(t, testdb.SQLite(t), harness.Options{Top: `default_profile = "hsm"`, Tables: tables})
	// The token's key is made after the root exists; the worker mounts it
	// when it starts again.
	ca.Run("hallmark-worker", "--config", ca.Config, "ca", "init", "--pkcs11", "softhsm", "--key-type", "p256")
	ca.Stop("worker")
	ca.Start("worker")
	hsm := harness.ReadCert(t, filepath.Join(ca.Dir, "ca", "softhsm.pem"))
	signedOnToken := func(name string, hours int) {
		t.Helper()
		c := order(t, ca, name)
		if string(c.AuthorityKeyId) != string(hsm.SubjectKeyId) {
			t.Fatalf("%s was not signed by the token's key (authority key id %x, token %x)", name, c.AuthorityKeyId, hsm.SubjectKeyId)
		}
		wantValidity(t, c, hours)
	}
	signedOnToken("before.hsm.test", 72)

	edit(t, ca, replace("validity_hours = 72", "validity_hours = 96"))
	tr := startTraffic(t, ca, 2)
	hangup(t, ca)
	tr.end(t)
	if a, r := outcomes(ca, "worker"); a != 1 || r != 0 {
		t.Fatalf("worker: %d applied, %d refused; want 1 applied\n%s", a, r, harness.Tail(ca.Log("worker"), 3000))
	}
	signedOnToken("after.hsm.test", 96)

	edit(t, ca, func(s string) string {
		s = replace("validity_hours = 96", "validity_hours = 120")(s)
		return replace(`pin_env = "HALLMARK_RELOAD_PIN"`, `pin_env = "HALLMARK_RELOAD_NO_PIN"`)(s)
	})
	hangup(t, ca)
	if a, r := outcomes(ca, "worker"); a != 1 || r != 1 {
		t.Fatalf("worker: %d applied, %d refused; want the token that cannot open refused\n%s", a, r, harness.Tail(ca.Log("worker"), 3000))
	}
	if log := ca.Log("worker"); !strings.Contains(log, "HALLMARK_RELOAD_NO_PIN") {
		t.Fatalf("the refusal does not name the PIN's variable:\n%s", harness.Tail(log, 3000))
	}
	signedOnToken("refused.hsm.test", 96)
}
