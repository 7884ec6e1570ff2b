// Package e2e starts the real hallmark-frontend and hallmark-worker binaries
// on loopback, with a DNS server the test runs, and drives real ACME clients
// against them.
package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/tests/testdb"
	"github.com/hallmark-ca/hallmark/tests/testdns"
)

// binDir holds the binaries TestMain builds once.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hallmark-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	for _, b := range []string{"hallmark", "hallmark-frontend", "hallmark-worker"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, b), "../../cmd/"+b)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n", b, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// requireTool finds an external client, failing in CI and skipping loudly
// elsewhere when it is missing.
func requireTool(t *testing.T, name, install string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" || os.Getenv("HALLMARK_REQUIRE_TOOLS") == "1" {
		t.Fatalf("%s is required here (CI) but not installed: %s", name, install)
	}
	t.Skipf("SKIPPING: %s is not installed (%s)", name, install)
	return ""
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// CA is a running Hallmark: one frontend and one worker process.
type CA struct {
	Dir      string
	Config   string
	BaseURL  string
	Root     string
	HTTPPort int // where the worker looks for http-01 answers
	ALPNPort int // where the worker looks for tls-alpn-01 answers
	DNS      *testdns.Server
	procs    map[string]*exec.Cmd
	logs     map[string]*os.File
	t        *testing.T
}

// dialects are the stores every end-to-end test runs against.
var dialects = []struct {
	name string
	url  func(t *testing.T) string
}{
	{"sqlite", func(t *testing.T) string { return testdb.SQLite(t) }},
	{"postgres", func(t *testing.T) string { return testdb.Postgres(t) }},
}

// startCA writes a configuration, migrates, creates the CA and starts both
// processes; everything stops when the test ends.
func startCA(t *testing.T, dbURL string, extra string) *CA {
	t.Helper()
	dir := t.TempDir()
	ca := &CA{Dir: dir, t: t, DNS: testdns.Start(t), HTTPPort: freePort(t), ALPNPort: freePort(t),
		procs: map[string]*exec.Cmd{}, logs: map[string]*os.File{}}
	listen := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ca.BaseURL = "https://" + listen
	ca.Root = filepath.Join(dir, "ca", "root.pem")
	ca.Config = filepath.Join(dir, "hallmark.toml")
	cfg := fmt.Sprintf(`[database]
url = %q

[server]
listen = %q
tls_cert = "frontend.pem"
tls_key = "frontend.key"
public_http_listen = "127.0.0.1:%d"
caa_identities = ["hallmark.test"]
retry_after_seconds = 1

[worker]
health_listen = "127.0.0.1:%d"
job_timeout_ms = 8000
rescue_after_ms = 15000

[challenge]
resolvers = [%q]
http_port = %d
https_port = %d
tls_alpn_port = %d
timeout_ms = 5000

[ca]
dir = "ca"
%s`, dbURL, listen, freePort(t), freePort(t), ca.DNS.Addr, ca.HTTPPort, ca.ALPNPort, ca.ALPNPort, extra)
	if err := os.WriteFile(ca.Config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ca.run("hallmark", "--config", ca.Config, "migrate")
	ca.run("hallmark-worker", "--config", ca.Config, "ca", "init", "--tls-cert", "frontend.pem", "--tls-key", "frontend.key")
	ca.Start("worker")
	ca.Start("frontend")
	ca.waitReady()
	t.Cleanup(ca.stopAll)
	return ca
}

// run runs a binary to completion, failing the test on error.
func (ca *CA) run(bin string, args ...string) string {
	ca.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, bin), args...)
	cmd.Dir = ca.Dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		ca.t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Start starts "worker" or "frontend" (again, after Kill).
func (ca *CA) Start(which string) {
	ca.t.Helper()
	logf, err := os.OpenFile(filepath.Join(ca.Dir, which+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		ca.t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binDir, "hallmark-"+which), "--config", ca.Config)
	cmd.Dir = ca.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		ca.t.Fatalf("starting %s: %v", which, err)
	}
	ca.procs[which], ca.logs[which] = cmd, logf
}

// Kill sends SIGKILL to a process, as a crash would.
func (ca *CA) Kill(which string) {
	if p := ca.procs[which]; p != nil && p.Process != nil {
		_ = p.Process.Kill()
		_ = p.Wait()
		delete(ca.procs, which)
	}
}

func (ca *CA) stopAll() {
	for which, p := range ca.procs {
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
		ca.logs[which].Close()
	}
	if ca.t.Failed() {
		for _, which := range []string{"frontend", "worker"} {
			b, _ := os.ReadFile(filepath.Join(ca.Dir, which+".log"))
			ca.t.Logf("---- %s log ----\n%s", which, tail(string(b), 6000))
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// HTTPClient trusts only the CA's root.
func (ca *CA) HTTPClient() *http.Client {
	pemBytes, err := os.ReadFile(ca.Root)
	if err != nil {
		ca.t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

func (ca *CA) waitReady() {
	ca.t.Helper()
	c := ca.HTTPClient()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := c.Get(ca.BaseURL + "/directory")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	ca.stopAll()
	ca.t.Fatalf("the frontend at %s did not become ready", ca.BaseURL)
}
