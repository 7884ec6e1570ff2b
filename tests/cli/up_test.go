package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/cmd/config"
)

// TestUpWritesLimits: the configuration `hallmark up` writes on first run
// sets the rate limits docs/operations.md recommends, leaves each
// account its default share of the validation slots, and passes the
// worker's own check. Only the CLI is built here, so up stops after
// writing, checking and migrating, for want of hallmark-worker.
func TestUpWritesLimits(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	cmd := exec.Command(bin, "up", "--data", data)
	cmd.Env = append(os.Environ(), "HALLMARK_CONFIG=", "HALLMARK_DATABASE_URL=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err == nil || !strings.Contains(errb.String(), "hallmark-worker") {
		t.Fatalf("hallmark up without hallmark-worker beside it: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	path := filepath.Join(data, "hallmark.toml")
	if !strings.Contains(out.String(), "wrote "+path) {
		t.Errorf("stdout %q does not say it wrote %s", out.String(), path)
	}
	cfg, err := config.LoadWorker(path)
	if err != nil {
		t.Fatalf("the generated configuration does not pass the worker's check: %v", err)
	}
	l := cfg.Limits
	for _, c := range []struct {
		key       string
		got, want int
	}{
		{"orders_per_account", l.OrdersPerAccount, 300},
		{"orders_window_seconds", l.OrdersWindowSeconds, 3 * 3600},
		{"pending_authorizations_per_account", l.PendingAuthorizationsPerAccount, 300},
		{"failed_validations_per_hour", l.FailedValidationsPerHour, 5},
		{"certificates_per_domain", l.CertificatesPerDomain, 0},
	} {
		if c.got != c.want {
			t.Errorf("limits.%s = %d in the generated configuration, want %d", c.key, c.got, c.want)
		}
	}
	if s := cfg.Worker.ValidationAccountShare; s != config.Default().Worker.ValidationAccountShare {
		t.Errorf("worker.validation_account_share = %g, want the default %g", s, config.Default().Worker.ValidationAccountShare)
	}
}
