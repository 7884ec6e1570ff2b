// Package knot runs Knot DNS (Debian's knot, knotd) on loopback for tests:
// an authoritative server for one zone that accepts RFC 2136 updates signed
// with one TSIG key, from a generated configuration in the test's
// directory, as a child process killed when the test ends. Every name
// under the zone that has no record of its own answers A 127.0.0.1 (a
// wildcard), so an ACME server resolving through it reaches loopback.
package knot

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/tests/testproc"
)

// Server is a running knotd.
type Server struct {
	Addr    string // "127.0.0.1:port", UDP and TCP
	Zone    string // "example.test." (fully qualified)
	KeyName string // the TSIG key's name (fully qualified)
	// Algorithm is the TSIG algorithm, as miekg/dns names it
	// ("hmac-sha256.").
	Algorithm string
	Secret    string // base64
}

// Start runs knotd for zone until the test ends. Without knotd it fails in
// CI and skips loudly elsewhere.
func Start(t testing.TB, zone string) *Server {
	t.Helper()
	bin, err := exec.LookPath("knotd")
	if err != nil {
		if os.Getenv("CI") == "true" || os.Getenv("HALLMARK_REQUIRE_TOOLS") == "1" {
			t.Fatalf("knotd (Debian's knot) is required here: %v", err)
		}
		t.Skipf("SKIPPING: knotd is not installed (apt-get install knot): %v", err)
	}
	zone = strings.TrimSuffix(zone, ".") + "."
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	s := &Server{Addr: testproc.FreeAddr(t), Zone: zone, KeyName: "hallmark-test.", Algorithm: "hmac-sha256.", Secret: base64.StdEncoding.EncodeToString(raw)}
	dir := t.TempDir()
	host, port, _ := net.SplitHostPort(s.Addr)
	conf := fmt.Sprintf(`server:
    rundir: "%[1]s"
    listen: %[2]s@%[3]s
log:
  - target: stderr
    any: info
database:
    storage: "%[1]s"
key:
  - id: %[4]s
    algorithm: hmac-sha256
    secret: %[5]s
acl:
  - id: update
    key: %[4]s
    action: update
template:
  - id: default
    storage: "%[1]s"
    file: "%%s.zone"
    zonefile-sync: -1
    zonefile-load: difference-no-serial
    journal-content: all
zone:
  - domain: %[6]s
    acl: update
`, dir, host, port, s.KeyName, s.Secret, zone)
	zoneFile := fmt.Sprintf("$ORIGIN %[1]s\n$TTL 5\n@ SOA ns.%[1]s hostmaster.%[1]s 1 3600 600 86400 5\n@ NS ns.%[1]s\n@ A 127.0.0.1\n* A 127.0.0.1\n", zone)
	if err := os.WriteFile(filepath.Join(dir, "knot.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, zone+"zone"), []byte(zoneFile), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "knotd.log")
	testproc.Start(t, "knotd", exec.Command(bin, "-c", filepath.Join(dir, "knot.conf")), logPath)
	testproc.WaitTCP(t, "knotd", s.Addr, logPath)
	return s
}

// SecretFile writes secret (base64) to a file in the test's directory, as
// an operator's tsig_secret_file, and returns its path.
func SecretFile(t testing.TB, secret string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tsig.secret")
	if err := os.WriteFile(p, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
