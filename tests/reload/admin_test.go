package reload

import (
	"crypto/x509"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/tests/harness"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

const adminToken = "reload-admin-token-8c41f07a2be95d36"

// windowTOML is profile "short" with its renewal window at [start, end].
func windowTOML(start, end float64) string {
	return fmt.Sprintf(`
[profiles.short]
backend = "local"
validity_hours = 50
key_types = ["p256", "rsa2048"]
challenges = ["http-01"]
identifier_types = ["dns"]
renewal_window_start = %g
renewal_window_end = %g
`, start, end)
}

// TestReloadAdminFollowsProfiles: the operator panel shows a certificate
// of a profile added by SIGHUP with that profile's renewal window (not
// the default middle third it gives a profile it does not know), and the
// window the next reload sets.
func TestReloadAdminFollowsProfiles(t *testing.T) {
	harness.RequireTool(t, "lego", "apt-get install lego")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "admin.token"), []byte(adminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	adminURL := fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
	ca := harness.StartCA(t, testdb.SQLite(t), harness.Options{Dir: dir, Tables: profileTOML(100) + fmt.Sprintf(`
[admin]
listen = %q
token_file = "admin.token"
`, adminURL)})
	adminURL = "http://" + adminURL

	edit(t, ca, func(s string) string { return s + windowTOML(0.1, 0.2) })
	hangup(t, ca)
	c, err := legoAt(t, ca, ca.BaseURL+"/profile/short/directory", "panel.reload.test")
	if err != nil {
		t.Fatal(err)
	}
	wantWindow(t, adminURL, c, 0.1)

	edit(t, ca, replace(windowTOML(0.1, 0.2), windowTOML(0.5, 0.6)))
	hangup(t, ca)
	wantWindow(t, adminURL, c, 0.5)
}

var renewalRE = regexp.MustCompile(`id="cert-renewal">([0-9: -]+Z) — `)

// wantWindow checks that the panel's page of c shows a renewal window
// starting at fraction start of its validity.
func wantWindow(t *testing.T, adminURL string, c *x509.Certificate, start float64) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/certs/%x", adminURL, c.SerialNumber.Bytes()), nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := renewalRE.FindSubmatch(body)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("the panel's certificate page: %s, no renewal window in:\n%s", resp.Status, harness.Tail(string(body), 2000))
	}
	at, err := time.Parse("2006-01-02 15:04:05Z", string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	got := float64(at.Sub(c.NotBefore)) / float64(c.NotAfter.Sub(c.NotBefore))
	if math.Abs(got-start) > 0.01 {
		t.Fatalf("the panel's renewal window of %x starts at %s, %.3f of its validity; want the profile's %.2f", c.SerialNumber, at, got, start)
	}
	t.Logf("the panel's renewal window starts at %.3f of the validity", got)
}
