// Package reload tests reloading the configuration of the real
// hallmark-frontend and hallmark-worker binaries without a restart: on
// SIGHUP and through `hallmark reload`, with clients issuing requests
// throughout, on both stores.
package reload

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/tests/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }

// profileTOML is the default profile at validity hours.
func profileTOML(hours int) string {
	return fmt.Sprintf(`
[profiles.default]
backend = "local"
validity_hours = %d
key_types = ["p256", "rsa2048"]
challenges = ["http-01"]
identifier_types = ["dns"]
`, hours)
}

func startCA(t *testing.T, dbURL string) *harness.CA {
	t.Helper()
	harness.RequireTool(t, "lego", "apt-get install lego")
	return harness.StartCA(t, dbURL, harness.Options{Tables: profileTOML(100)})
}

// edit rewrites the CA's configuration file with f.
func edit(t *testing.T, ca *harness.CA, f func(string) string) {
	t.Helper()
	b, err := os.ReadFile(ca.Config)
	if err != nil {
		t.Fatal(err)
	}
	next := f(string(b))
	if next == string(b) {
		t.Fatal("the edit changed nothing")
	}
	if err := os.WriteFile(ca.Config, []byte(next), 0o644); err != nil {
		t.Fatal(err)
	}
}

func replace(old, new string) func(string) string {
	return func(s string) string { return strings.Replace(s, old, new, 1) }
}

// outcomes counts a process's reload outcomes logged so far.
func outcomes(ca *harness.CA, which string) (applied, refused int) {
	log := ca.Log(which)
	return strings.Count(log, `msg="configuration reloaded"`), strings.Count(log, `msg="configuration not reloaded`)
}

// hangup sends SIGHUP to both processes and waits for each one's outcome.
func hangup(t *testing.T, ca *harness.CA) {
	t.Helper()
	before := map[string][2]int{}
	for _, p := range []string{"frontend", "worker"} {
		a, r := outcomes(ca, p)
		before[p] = [2]int{a, r}
		ca.Signal(p, syscall.SIGHUP)
	}
	start := time.Now()
	deadline := start.Add(30 * time.Second)
	for _, p := range []string{"frontend", "worker"} {
		for {
			a, r := outcomes(ca, p)
			if a+r > before[p][0]+before[p][1] {
				t.Logf("%s: an outcome logged %s after SIGHUP", p, time.Since(start).Round(time.Millisecond))
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s logged no reload outcome after SIGHUP:\n%s", p, harness.Tail(ca.Log(p), 3000))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// lego orders a certificate for name over http-01 with a fresh account.
func lego(t *testing.T, ca *harness.CA, name string) (*x509.Certificate, error) {
	t.Helper()
	path := t.TempDir()
	l := harness.Lego{Bin: harness.RequireTool(t, "lego", "apt-get install lego"), Directory: ca.BaseURL + "/directory",
		Root: ca.Root, Email: "reload@hallmark.test", Path: path}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, err := l.Run(ctx, "--domains", name, "--key-type", "ec256", "--http", "--http.port", fmt.Sprintf("127.0.0.1:%d", ca.HTTPPort), "run")
	if err != nil {
		return nil, fmt.Errorf("lego run for %s: %v\n%s", name, err, out)
	}
	return harness.ReadCert(t, filepath.Join(path, "certificates", name+".crt")), nil
}

// order is lego's certificate, failing the test if there is none.
func order(t *testing.T, ca *harness.CA, name string) *x509.Certificate {
	t.Helper()
	c, err := lego(t, ca, name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// validityHours is a certificate's validity to the nearest hour (its
// notAfter is inclusive, a second before the profile's end).
func validityHours(c *x509.Certificate) int {
	return int(c.NotAfter.Sub(c.NotBefore).Round(time.Hour) / time.Hour)
}

func wantValidity(t *testing.T, c *x509.Certificate, hours int) {
	t.Helper()
	if got := validityHours(c); got != hours {
		t.Fatalf("certificate %x is valid %d h (%s to %s), want the profile's %d h", c.SerialNumber, got, c.NotBefore, c.NotAfter, hours)
	}
}

// presented is the certificate the frontend presents in a new handshake.
func presented(t *testing.T, ca *harness.CA) *x509.Certificate {
	t.Helper()
	u, _ := url.Parse(ca.BaseURL)
	conn, err := tls.Dial("tcp", u.Host, &tls.Config{RootCAs: roots(t, ca), ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("TLS handshake with the frontend: %v", err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

func roots(t *testing.T, ca *harness.CA) *x509.CertPool {
	t.Helper()
	b, err := os.ReadFile(ca.Root)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b)
	return pool
}

// traffic is clients asking the frontend continuously, each request over
// a new TLS connection (so each is a handshake) or a kept-alive one, and
// counting every answer that is not a success.
type traffic struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	failures   []string
	stop       chan struct{}
	wg         sync.WaitGroup
}

func startTraffic(t *testing.T, ca *harness.CA, clients int) *traffic {
	tr := &traffic{stop: make(chan struct{})}
	pool := roots(t, ca)
	for i := range clients {
		tp := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: i%2 == 0}
		c := &http.Client{Timeout: 10 * time.Second, Transport: tp}
		tr.wg.Add(1)
		go func() {
			defer tr.wg.Done()
			defer tp.CloseIdleConnections()
			for n := 0; ; n++ {
				select {
				case <-tr.stop:
					return
				default:
				}
				path, method := "/directory", http.MethodGet
				if n%2 == 1 {
					path, method = "/acme/new-nonce", http.MethodHead
				}
				tr.one(c, method, ca.BaseURL+path)
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	return tr
}

func (tr *traffic) one(c *http.Client, method, u string) {
	req, _ := http.NewRequest(method, u, nil)
	resp, err := c.Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 300 {
			tr.ok.Add(1)
			return
		}
		err = fmt.Errorf("status %s", resp.Status)
	}
	tr.failed.Add(1)
	tr.mu.Lock()
	tr.failures = append(tr.failures, fmt.Sprintf("%s %s: %v", method, u, err))
	tr.mu.Unlock()
}

// end stops the clients and fails the test if any request failed.
func (tr *traffic) end(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); tr.ok.Load() < 50 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	close(tr.stop)
	tr.wg.Wait()
	if n := tr.failed.Load(); n > 0 {
		t.Fatalf("%d of %d requests failed during the reload, e.g. %v", n, n+tr.ok.Load(), tr.failures[:min(5, len(tr.failures))])
	}
	if tr.ok.Load() < 50 {
		t.Fatalf("only %d requests were made during the reload: the clients did not run", tr.ok.Load())
	}
	t.Logf("%d requests during the reload, none failed", tr.ok.Load())
}

// hallmark runs the CLI in the CA's directory and returns its output and
// exit code.
func hallmark(t *testing.T, ca *harness.CA, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(harness.Bin("hallmark"), append([]string{"--config", ca.Config}, args...)...)
	cmd.Dir = ca.Dir
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("hallmark %v: %v", args, err)
	}
	return string(out), 0
}
