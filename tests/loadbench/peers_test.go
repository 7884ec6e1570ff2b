package loadbench

import (
	"context"
	"fmt"
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

// stepCAVersion is the release `make bench` and .ci/run build.
const stepCAVersion = "v0.30.2"

var (
	stepCAOnce sync.Once
	stepCABin  string
	stepCAErr  error
)

// stepCA returns the step-ca binary: $HALLMARK_STEP_CA, or the one cached
// in the tools directory ($HALLMARK_TOOLS_DIR or $HOME/.cache/hallmark-tools,
// where .ci/run builds it), built there from the module proxy when missing
// (about two minutes). Without it the test fails in CI and skips loudly
// elsewhere.
func stepCA(t *testing.T) string {
	stepCAOnce.Do(func() {
		if p := os.Getenv("HALLMARK_STEP_CA"); p != "" {
			stepCABin = p
			return
		}
		tools := os.Getenv("HALLMARK_TOOLS_DIR")
		if tools == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				stepCAErr = err
				return
			}
			tools = filepath.Join(home, ".cache", "hallmark-tools")
		}
		dir := filepath.Join(tools, "step-ca-"+stepCAVersion)
		stepCABin = filepath.Join(dir, "step-ca")
		if _, err := os.Stat(stepCABin); err == nil {
			return
		}
		stepCAErr = buildStepCA(dir)
	})
	if stepCAErr != nil {
		if harness.Required() {
			t.Fatalf("step-ca is required here: %v", stepCAErr)
		}
		t.Skipf("SKIPPING: step-ca could not be built: %v", stepCAErr)
	}
	return stepCABin
}

// buildStepCA installs step-ca into a scratch directory and moves it into
// dir, so a build cut short leaves no binary behind.
func buildStepCA(dir string) error {
	tmp, err := os.MkdirTemp("", "hallmark-step-ca-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "install", "github.com/smallstep/certificates/cmd/step-ca@"+stepCAVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go install github.com/smallstep/certificates/cmd/step-ca@%s: %v\n%s", stepCAVersion, err, out)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.Rename(filepath.Join(tmp, "step-ca"), filepath.Join(dir, "step-ca"))
}

// TestStepCA: the bench starts step-ca as a reference beside Pebble (its
// own root, an ACME provisioner, http-01 on the generator's responder, the
// generator's DNS) and drives it: every issuance done, no error, and the
// row is the step-ca reference of its concurrency.
func TestStepCA(t *testing.T) {
	bin := stepCA(t)
	out, err := exec.Command(loadBin, "bench", "--bin", filepath.Dir(harness.Bin("hallmark")), "--step-ca", bin,
		"--targets", "step-ca", "--concurrency", "2", "--count", "4", "--timeout", "60s").CombinedOutput()
	if err != nil {
		t.Fatalf("hallmark-load bench --targets step-ca: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m)^\| step-ca \(badger\) \| 2 \| 4 \| [0-9.]+ \| — \| 1\.00× \|.*\| 0 \|$`).MatchString(string(out)) {
		t.Errorf("no step-ca row with 4 issued, no error, as its own reference:\n%s", out)
	}
}

// TestClients: the clients command runs Debian's lego and certbot, each
// run one certificate, against step-ca and Hallmark on SQLite, each
// trusting the CA and answering http-01 on the port the CA validates, and
// tables each client's timed runs per target.
func TestClients(t *testing.T) {
	bin := stepCA(t)
	lego := harness.RequireTool(t, "lego", "apt-get install lego")
	certbot := harness.RequireTool(t, "certbot", "apt-get install certbot")
	for _, tc := range []struct {
		client, targets string
		count           int
		rows            []string
	}{
		{"lego", "step-ca,hallmark-sqlite", 3, []string{"step-ca (badger)", "hallmark sqlite local"}},
		{"certbot", "step-ca", 1, []string{"step-ca (badger)"}},
	} {
		out, err := exec.Command(loadBin, "clients", "--bin", filepath.Dir(harness.Bin("hallmark")), "--step-ca", bin,
			"--lego", lego, "--certbot", certbot, "--clients", tc.client, "--targets", tc.targets,
			"--count", fmt.Sprint(tc.count), "--timeout", "90s").CombinedOutput()
		if err != nil {
			t.Fatalf("hallmark-load clients --clients %s: %v\n%s", tc.client, err, out)
		}
		for _, target := range tc.rows {
			row := fmt.Sprintf(`(?m)^\| %s \| %s \| %d \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| 0 \|$`, regexp.QuoteMeta(target), tc.client, tc.count)
			if !regexp.MustCompile(row).MatchString(string(out)) {
				t.Errorf("no row of %d timed %s runs against %s without a failure:\n%s", tc.count, tc.client, target, out)
			}
		}
		if n := strings.Count(string(out), "| "+tc.client+" |"); n != len(tc.rows) {
			t.Errorf("%d %s rows, want %d:\n%s", n, tc.client, len(tc.rows), out)
		}
	}
}
