package pkcs11

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/signer/signerconf"
)

// TestPINFromEnvAndFile: the PIN comes from the environment variable or
// the file a backend names (a trailing newline dropped), and an error
// about a missing one never shows another's value.
func TestPINFromEnvAndFile(t *testing.T) {
	t.Setenv("HALLMARK_TEST_PIN", "1234")
	if c, err := ConfigFor(signerconf.PKCS11{PINEnv: "HALLMARK_TEST_PIN"}, 0); err != nil || c.PIN != "1234" {
		t.Fatalf("PIN from env = %q, %v", c.PIN, err)
	}
	f := filepath.Join(t.TempDir(), "pin")
	if err := os.WriteFile(f, []byte("5678\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := ConfigFor(signerconf.PKCS11{PINFile: f}, 0); err != nil || c.PIN != "5678" {
		t.Fatalf("PIN from file = %q, %v", c.PIN, err)
	}
	_, err := ConfigFor(signerconf.PKCS11{PINEnv: "HALLMARK_TEST_PIN_UNSET"}, 0)
	if err == nil || strings.Contains(err.Error(), "1234") {
		t.Fatalf("missing env: %v", err)
	}
}
