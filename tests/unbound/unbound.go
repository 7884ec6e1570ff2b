// Package unbound runs Debian's unbound, a validating recursive resolver,
// on a loopback port for tests: it resolves the zones it is given through
// the authoritative servers the test runs (stub zones), validates DNSSEC
// from the trust anchors it is given (and no other: no root anchor, no
// network), and answers with Extended DNS Errors (RFC 8914) unless told
// not to. A child process with a generated configuration in the test's
// directory, killed when the test ends; its log is shown when the test fails.
package unbound

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/tests/testproc"
)

// Config is what the resolver knows.
type Config struct {
	// Stubs maps each zone ("secure.test.") to the "host:port" of its
	// authoritative server.
	Stubs map[string]string
	// TrustAnchors are DNSKEY or DS records in zone-file syntax; zones
	// under none of them are insecure.
	TrustAnchors []string
	// NoEDE turns Extended DNS Errors off, as a resolver without them
	// answers: a bogus answer is then a bare SERVFAIL.
	NoEDE bool
}

// Server is a running unbound.
type Server struct {
	Addr string // "127.0.0.1:port", UDP and TCP
}

// Start runs unbound until the test ends. Without it, it fails in CI and
// skips loudly elsewhere.
func Start(t testing.TB, c Config) *Server {
	t.Helper()
	bin, err := exec.LookPath("unbound")
	if err != nil {
		if p := "/usr/sbin/unbound"; fileExists(p) {
			bin, err = p, nil
		}
	}
	if err != nil {
		if os.Getenv("CI") == "true" || os.Getenv("HALLMARK_REQUIRE_TOOLS") == "1" {
			t.Fatalf("unbound (Debian's unbound) is required here: %v", err)
		}
		t.Skipf("SKIPPING: unbound is not installed (apt-get install unbound): %v", err)
	}
	dir := t.TempDir()
	s := &Server{Addr: testproc.FreeAddr(t)}
	conf := config(dir, s.Addr, c)
	confPath := filepath.Join(dir, "unbound.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "unbound.log")
	testproc.Start(t, "unbound", exec.Command(bin, "-d", "-c", confPath), logPath)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("---- unbound.conf ----\n%s", conf)
		}
	})
	testproc.WaitTCP(t, "unbound", s.Addr, logPath)
	return s
}

// config is unbound.conf for c, listening on addr, with its files in dir.
func config(dir, addr string, c Config) string {
	host, port, _ := net.SplitHostPort(addr)
	var b strings.Builder
	fmt.Fprintf(&b, `server:
    interface: %[2]s
    port: %[3]s
    do-daemonize: no
    chroot: ""
    username: ""
    directory: "%[1]s"
    pidfile: "%[1]s/unbound.pid"
    use-syslog: no
    logfile: ""
    verbosity: 1
    log-servfail: yes
    val-log-level: 2
    num-threads: 1
    do-ip6: no
    access-control: 127.0.0.0/8 allow
    # The authoritative servers are on loopback, which unbound does not
    # ask by default.
    do-not-query-localhost: no
    qname-minimisation: no
    prefetch: no
    module-config: "validator iterator"
    ede: %[4]s
`, dir, host, port, map[bool]string{false: "yes", true: "no"}[c.NoEDE])
	for zone := range c.Stubs {
		// Resolved, not answered by one of unbound's built-in local zones
		// (test., invalid., ...): the closest local zone decides.
		fmt.Fprintf(&b, "    local-zone: %q transparent\n", zone)
	}
	for _, ta := range c.TrustAnchors {
		fmt.Fprintf(&b, "    trust-anchor: %q\n", strings.Join(strings.Fields(ta), " "))
	}
	for zone, auth := range c.Stubs {
		h, p, _ := net.SplitHostPort(auth)
		fmt.Fprintf(&b, "stub-zone:\n    name: %q\n    stub-addr: %s@%s\n", zone, h, p)
	}
	b.WriteString("remote-control:\n    control-enable: no\n")
	return b.String()
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
