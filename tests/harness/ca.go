package harness

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/tests/testdns"
)

// Options shape a CA beyond the configuration every test package shares.
type Options struct {
	Dir      string   // the CA's directory; a new t.TempDir() when empty
	Top      string   // TOML before the first table (e.g. default_profile)
	Tables   string   // further TOML tables (profiles, backends, policy, admin)
	Server   string   // further [server] lines
	Worker   string   // further [worker] lines
	InitArgs []string // added to `hallmark-worker ca init`
	Env      []string // added to every CA process's environment
	// Resolver, when set, is what validation resolves through instead of
	// the CA's testdns server (a validating resolver: tests/unbound).
	Resolver  string
	Challenge string // further [challenge] lines (dnssec = "require")
}

// CA is a running Hallmark: one frontend and one worker process, and a DNS
// server the worker resolves through.
type CA struct {
	Dir      string
	Config   string
	BaseURL  string
	Root     string
	HTTPPort int    // where the worker looks for http-01 answers
	ALPNPort int    // where the worker looks for tls-alpn-01 answers
	Health   string // the worker's health_listen: /healthz, /readyz, /metrics
	DNS      *testdns.Server
	Env      []string // the CA processes' extra environment

	procs map[string]*Proc // "frontend", "worker"
	t     *testing.T
}

// StartCA writes a configuration for the store at dbURL, migrates, creates
// the CA and starts both processes; everything stops when the test ends.
func StartCA(t *testing.T, dbURL string, o Options) *CA {
	t.Helper()
	dir := o.Dir
	if dir == "" {
		dir = t.TempDir()
	}
	ca := &CA{Dir: dir, t: t, DNS: testdns.Start(t), Env: o.Env}
	ca.Root = filepath.Join(dir, "ca", "root.pem")
	// FreePort reserves ports against other tests, but a program outside
	// the tests may still bind one first. A start that lost such a race (a
	// process exits at once) is retried with new ports.
	for attempt := 1; ; attempt++ {
		health := ca.configure(t, dbURL, o)
		if attempt == 1 {
			ca.Run("hallmark", "--config", ca.Config, "migrate")
			ca.Run("hallmark-worker", append([]string{"--config", ca.Config, "ca", "init", "--tls-cert", "frontend.pem", "--tls-key", "frontend.key"}, o.InitArgs...)...)
		}
		ca.procs = map[string]*Proc{}
		for _, which := range []string{"frontend", "worker"} {
			ca.procs[which] = &Proc{Name: which, Dir: dir, Bin: "hallmark-" + which, Args: []string{"--config", ca.Config}, Env: o.Env}
		}
		ca.Start("worker")
		ca.Start("frontend")
		deadline := time.Now().Add(30 * time.Second)
		ready := WaitOK(ca.HTTPClient(), ca.BaseURL+"/directory", deadline) &&
			WaitOK(&http.Client{Timeout: 2 * time.Second}, "http://"+health+"/healthz", deadline)
		if ready {
			t.Cleanup(func() { StopAll(t, ca.procs["frontend"], ca.procs["worker"]) })
			return ca
		}
		lostRace := strings.Contains(ca.procs["frontend"].Log()+ca.procs["worker"].Log(), "address already in use")
		if !lostRace || attempt == 3 {
			t.Errorf("the CA at %s did not become ready (frontend directory and worker /healthz)", ca.BaseURL)
			StopAll(t, ca.procs["frontend"], ca.procs["worker"]) // dumps both logs: the test has failed
			t.FailNow()
		}
		t.Logf("a CA port was taken by another process (attempt %d); starting again on new ports", attempt)
		StopAll(t, ca.procs["frontend"], ca.procs["worker"])
	}
}

// configure picks ports and writes the configuration; it returns the
// worker's health address.
func (ca *CA) configure(t *testing.T, dbURL string, o Options) string {
	ca.HTTPPort, ca.ALPNPort = FreePort(t), FreePort(t)
	listen := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	health := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	ca.Health = health
	ca.BaseURL = "https://" + listen
	c := Config{
		Top:                o.Top,
		DatabaseURL:        dbURL,
		Listen:             listen,
		PublicHTTPListen:   fmt.Sprintf("127.0.0.1:%d", FreePort(t)),
		ServerExtra:        "tls_cert = \"frontend.pem\"\ntls_key = \"frontend.key\"\n" + o.Server,
		HealthListen:       health,
		WorkerExtra:        "job_timeout_ms = 8000\nrescue_after_ms = 15000\n" + o.Worker,
		Resolver:           ca.DNS.Addr,
		HTTPPort:           ca.HTTPPort,
		HTTPSPort:          ca.ALPNPort,
		ALPNPort:           ca.ALPNPort,
		ChallengeTimeoutMS: 5000,
		CADir:              "ca",
		Tables:             o.Tables,
	}
	c.Resolver, c.ChallengeExtra = cmp.Or(o.Resolver, c.Resolver), o.Challenge
	ca.Config = WriteConfig(t, ca.Dir, "hallmark", c)
	return health
}

// Run runs a binary in the CA's directory to completion, failing the test
// on error, and returns its output.
func (ca *CA) Run(bin string, args ...string) string {
	ca.t.Helper()
	return Run(ca.t, ca.Dir, ca.Env, bin, args...)
}

// Start starts "worker" or "frontend" (again, after Kill).
func (ca *CA) Start(which string) {
	ca.t.Helper()
	ca.procs[which].Start(ca.t)
}

// Kill sends SIGKILL to "worker" or "frontend", as a crash would.
func (ca *CA) Kill(which string) { ca.procs[which].Kill() }

// Log is the log of "worker" or "frontend" so far.
func (ca *CA) Log(which string) string { return ca.procs[which].Log() }

// Signal sends sig to "worker" or "frontend" (SIGHUP: reload the
// configuration).
func (ca *CA) Signal(which string, sig os.Signal) {
	ca.t.Helper()
	p := ca.procs[which]
	if p.Cmd == nil || p.Cmd.Process == nil {
		ca.t.Fatalf("%s is not running", which)
	}
	if err := p.Cmd.Process.Signal(sig); err != nil {
		ca.t.Fatalf("signalling %s: %v", which, err)
	}
}

// Stop shuts "worker" or "frontend" down as an operator would (SIGTERM):
// running jobs finish and leases are released.
func (ca *CA) Stop(which string) { ca.procs[which].Stop() }

// HTTPClient trusts only the CA's root.
func (ca *CA) HTTPClient() *http.Client {
	ca.t.Helper()
	return HTTPClient(ca.t, ca.Root)
}

// HTTPClient trusts only the root certificate in the PEM file root.
func HTTPClient(t *testing.T, root string) *http.Client {
	t.Helper()
	pemBytes, err := os.ReadFile(root)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// WaitOK polls u with c every 100ms until it answers 200 or deadline
// passes, and says whether it did.
func WaitOK(c *http.Client, u string, deadline time.Time) bool {
	for {
		resp, err := c.Get(u)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}
