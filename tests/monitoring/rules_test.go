// Package monitoring checks what deploy/ ships for monitoring: the alert
// rules (promtool), and that the alerts and the Grafana dashboard name only
// metrics the real binaries export.
package monitoring

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/tests/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }

const (
	alertsFile     = "../../deploy/prometheus/alerts.yml"
	alertTestsFile = "../../deploy/prometheus/alerts_test.yml"
	dashboardFile  = "../../deploy/grafana/hallmark.json"
)

func promtool(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := harness.RequireTool(t, "promtool", "apt-get install prometheus")
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}

// TestAlertRules checks the rules and runs their unit tests: each alert
// (CRL half stale, jobs abandoned, queue not draining, no worker for a
// profile, validation failure ratio, signer unavailable) fires on the
// series the binaries export, and not before.
func TestAlertRules(t *testing.T) {
	if out, err := promtool(t, "check", "rules", alertsFile); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	if out, err := promtool(t, "test", "rules", alertTestsFile); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// TestAlertTestsFailWithoutTheAlerts runs the same unit tests against
// rules that never fire: they must fail, or they test nothing.
func TestAlertTestsFailWithoutTheAlerts(t *testing.T) {
	rules, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(alertTestsFile)
	if err != nil {
		t.Fatal(err)
	}
	// Every alert's condition made false; the names and labels stay.
	var off []string
	for _, line := range strings.Split(string(rules), "\n") {
		if strings.Contains(line, "expr:") {
			line = line[:strings.Index(line, "expr:")] + "expr: vector(1) == 0"
		} else if strings.HasPrefix(line, "          ") && !strings.Contains(line, ":") {
			continue // the rest of a multi-line expression
		} else if strings.HasPrefix(line, "            ") && strings.Contains(line, "hallmark_") && !strings.Contains(line, "description") {
			continue
		}
		off = append(off, line)
	}
	dir := t.TempDir()
	for name, b := range map[string][]byte{"alerts.yml": []byte(strings.Join(off, "\n")), "alerts_test.yml": tests} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := promtool(t, "check", "rules", filepath.Join(dir, "alerts.yml")); err != nil {
		t.Fatalf("the rules made silent do not parse, so this test proves nothing: %v\n%s", err, out)
	}
	out, err := promtool(t, "test", "rules", filepath.Join(dir, "alerts_test.yml"))
	if err == nil {
		t.Fatalf("the alert tests passed against rules that never fire:\n%s", out)
	}
	for _, name := range []string{"HallmarkCRLHalfStale", "HallmarkJobsAbandoned", "HallmarkQueueNotDraining",
		"HallmarkNoWorkerForProfile", "HallmarkValidationFailureRatio", "HallmarkSignerUnavailable"} {
		if !strings.Contains(out, "alertname: "+name) {
			t.Errorf("no test of %s failed when it could not fire", name)
		}
	}
}
