// Package admin drives the operator panel of the real hallmark-frontend in
// headless Chromium: the binaries are built and started on loopback, lego
// obtains a real certificate, and the browser revokes it.
package admin

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/tests/harness"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }

var requireTool = harness.RequireTool

// ca is a running frontend (with the admin panel) and worker.
type ca struct {
	*harness.CA
	adminURL, token string
}

const adminToken = "browser-test-token-5f0c2a9e7d31b4c8"

func startCA(t *testing.T) *ca {
	t.Helper()
	dir := t.TempDir()
	adminListen := fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
	if err := os.WriteFile(filepath.Join(dir, "admin.token"), []byte(adminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &ca{token: adminToken, adminURL: "http://" + adminListen}
	c.CA = harness.StartCA(t, testdb.SQLite(t), harness.Options{Dir: dir, Tables: fmt.Sprintf(`
[admin]
listen = %q
token_file = "admin.token"
`, adminListen)})
	if !harness.WaitOK(http.DefaultClient, c.adminURL+"/healthz", time.Now().Add(30*time.Second)) {
		t.Fatalf("the frontend at %s (admin %s) did not become ready", c.BaseURL, c.adminURL)
	}
	return c
}
