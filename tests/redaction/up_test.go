package redaction

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/tests/testproc"

	"github.com/hallmark-ca/hallmark/tests/harness"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// writeUpConfig writes up's development configuration on free ports
// into data, where up keeps it (it writes its own only when there is
// none), and returns the dev DNS server's address.
func writeUpConfig(t *testing.T, data string) string {
	t.Helper()
	port := func() int { return harness.FreePort(t) }
	dns := fmt.Sprintf("127.0.0.1:%d", port())
	conf := fmt.Sprintf(`[database]
url = "sqlite:hallmark.db"
[server]
listen = "127.0.0.1:%d"
public_http_listen = "127.0.0.1:%d"
tls_cert = "frontend.pem"
tls_key = "frontend.key"
[worker]
health_listen = "127.0.0.1:%d"
[challenge]
resolvers = [%q]
http_port = %d
https_port = %d
tls_alpn_port = %d
[ca]
dir = "ca"
[admin]
listen = "127.0.0.1:%d"
token_file = "admin.token"
`, port(), port(), port(), dns, port(), port(), port(), port())
	if err := os.WriteFile(filepath.Join(data, "hallmark.toml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return dns
}

// TestUpNeverPrintsThePassword runs `hallmark up` on PostgreSQL through
// HALLMARK_DATABASE_URL with a password, on free ports (its configuration
// is written first, so up keeps it), until the CA is running, and stops it
// with Ctrl-C. Up migrates, creates the CA with the worker binary and
// starts the worker and the frontend: none of them, nor any file in the
// data directory, shows the password or the admin token up created.
func TestUpNeverPrintsThePassword(t *testing.T) {
	dbURL := withPassword(t, testdb.Postgres(t))
	data := filepath.Join(t.TempDir(), "data") // t.TempDir is 0755, which up refuses
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	dns := writeUpConfig(t, data)
	cmd := exec.Command(harness.Bin("hallmark"), "up", "--data", data, "--dns", dns)
	cmd.Env = append(os.Environ(), "HALLMARK_CONFIG=", "HALLMARK_DEBUG=1", "HALLMARK_DATABASE_URL="+dbURL)
	var out testproc.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.After(90 * time.Second)
	for running := false; !running; {
		select {
		case err := <-done:
			t.Fatalf("hallmark up exited before it was running: %v\n%s", err, out.String())
		case <-deadline:
			_ = cmd.Process.Signal(os.Interrupt)
			<-done
			t.Fatalf("hallmark up was not running within 90s:\n%s", out.String())
		case <-time.After(100 * time.Millisecond):
			running = strings.Contains(out.String(), "Hallmark is running")
		}
	}
	// Ctrl-C: up stops the worker and the frontend, which it started in
	// process groups of their own, and waits for them.
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("hallmark up after Ctrl-C: %v", err)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("hallmark up did not stop within 30s of Ctrl-C:\n%s", out.String())
	}
	token, err := os.ReadFile(filepath.Join(data, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	o := &outputs{t: t, all: []output{{what: "hallmark up", text: out.String()}}}
	o.dir(data)
	for _, got := range o.all {
		if strings.Contains(got.text, strings.TrimSpace(string(token))) {
			t.Errorf("%s shows the admin token", got.what)
		}
	}
	if !strings.Contains(out.String(), "process=worker") || !strings.Contains(out.String(), "process=frontend") {
		t.Errorf("the worker's and the frontend's logs are not in up's output:\n%s", out.String())
	}
	o.scan()
}
