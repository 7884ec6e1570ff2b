// Package admin drives the operator panel of the real hallmark-frontend in
// headless Chromium: the binaries are built and started on loopback, lego
// obtains a real certificate, and the browser revokes it.
package admin

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

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hallmark-admin-bin-")
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

// requireTool fails in CI and skips loudly elsewhere when a tool is missing.
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

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// ca is a running frontend (with the admin panel) and worker.
type ca struct {
	dir, config, baseURL, adminURL, root, token string
	httpPort                                    int
	procs                                       map[string]*exec.Cmd
	t                                           *testing.T
}

const adminToken = "browser-test-token-5f0c2a9e7d31b4c8"

func startCA(t *testing.T) *ca {
	t.Helper()
	dir := t.TempDir()
	dns := testdns.Start(t)
	c := &ca{dir: dir, t: t, httpPort: freePort(t), procs: map[string]*exec.Cmd{}, token: adminToken}
	listen := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	adminListen := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	c.baseURL, c.adminURL = "https://"+listen, "http://"+adminListen
	c.root = filepath.Join(dir, "ca", "root.pem")
	c.config = filepath.Join(dir, "hallmark.toml")
	if err := os.WriteFile(filepath.Join(dir, "admin.token"), []byte(adminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	alpn := freePort(t)
	cfg := fmt.Sprintf(`[database]
url = %q

[server]
listen = %q
tls_cert = "frontend.pem"
tls_key = "frontend.key"
public_http_listen = "127.0.0.1:%d"
caa_identities = ["hallmark.test"]
retry_after_seconds = 1

[admin]
listen = %q
token_file = "admin.token"

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
`, testdb.SQLite(t), listen, freePort(t), adminListen, freePort(t), dns.Addr, c.httpPort, alpn, alpn)
	if err := os.WriteFile(c.config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	c.run("hallmark", "--config", c.config, "migrate")
	c.run("hallmark-worker", "--config", c.config, "ca", "init", "--tls-cert", "frontend.pem", "--tls-key", "frontend.key")
	c.start("worker")
	c.start("frontend")
	t.Cleanup(c.stop)
	c.waitReady()
	return c
}

func (c *ca) run(bin string, args ...string) {
	c.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, bin), args...)
	cmd.Dir = c.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		c.t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
	}
}

func (c *ca) start(which string) {
	c.t.Helper()
	logf, err := os.Create(filepath.Join(c.dir, which+".log"))
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binDir, "hallmark-"+which), "--config", c.config)
	cmd.Dir = c.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("starting %s: %v", which, err)
	}
	c.procs[which] = cmd
}

func (c *ca) stop() {
	for _, p := range c.procs {
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
	if c.t.Failed() {
		for _, which := range []string{"frontend", "worker"} {
			b, _ := os.ReadFile(filepath.Join(c.dir, which+".log"))
			s := string(b)
			if len(s) > 6000 {
				s = "…" + s[len(s)-6000:]
			}
			c.t.Logf("---- %s log ----\n%s", which, s)
		}
	}
}

func (c *ca) acmeClient() *http.Client {
	pemBytes, err := os.ReadFile(c.root)
	if err != nil {
		c.t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

func (c *ca) waitReady() {
	c.t.Helper()
	acme := c.acmeClient()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ok := 0
		if resp, err := acme.Get(c.baseURL + "/directory"); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				ok++
			}
		}
		if resp, err := http.Get(c.adminURL + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				ok++
			}
		}
		if ok == 2 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("the frontend at %s (admin %s) did not become ready", c.baseURL, c.adminURL)
}
