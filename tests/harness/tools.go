package harness

import (
	"os"
	"os/exec"
	"testing"
)

// Required reports whether missing tools fail the test rather than skip
// it: in CI, or when HALLMARK_REQUIRE_TOOLS=1.
func Required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("HALLMARK_REQUIRE_TOOLS") == "1"
}

// RequireTool finds an external tool: it fails in CI (see Required) and
// skips loudly elsewhere when the tool is missing.
func RequireTool(t *testing.T, name, install string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if Required() {
		t.Fatalf("%s is required here (CI) but not installed: %s", name, install)
	}
	t.Skipf("SKIPPING: %s is not installed (%s)", name, install)
	return ""
}

// Tail is the last n bytes of s, marked when cut.
func Tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
