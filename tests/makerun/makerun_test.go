package makerun

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/tests/testproc"

	"github.com/hallmark-ca/hallmark/tests/harness"
)

const repo = "../.."

// ports are make run's fixed loopback ports and lego's (README.md).
var ports = []int{14000, 14001, 14053, 14080, 14090, 5001, 5002}

// TestMakeRun runs `make run` with its data in a private temporary
// directory, checks that `hallmark up` prints every address the README's
// make run paragraph names and that each binary reports the version make
// stamped, runs the README's lego block line by line (http-01, tls-alpn-01,
// dns-01 through the dev DNS's zone file, an RSA key, renew, revoke), and
// stops it with Ctrl-C.
func TestMakeRun(t *testing.T) {
	lego := harness.RequireTool(t, "lego", "apt-get install lego")
	harness.RequireTool(t, "make", "apt-get install make")
	r := readREADME(t)
	machineLock(t)
	portsFree(t)

	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "hallmark-data")
	mk := exec.Command("make", "--no-print-directory", "run", "BIN="+filepath.Join(dir, "bin"), "DATA="+data)
	mk.Dir = repo
	mk.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a terminal's process group: Ctrl-C reaches make and up
	out := &testproc.Buffer{}
	mk.Stdout, mk.Stderr = out, out
	if err := mk.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mk.Wait() }()
	stopped := false
	ctrlC := func() error {
		stopped = true
		_ = syscall.Kill(-mk.Process.Pid, syscall.SIGINT)
		select {
		case err := <-done:
			return err
		case <-time.After(40 * time.Second):
			_ = syscall.Kill(-mk.Process.Pid, syscall.SIGKILL)
			return fmt.Errorf("make run did not stop within 40 s of Ctrl-C")
		}
	}
	t.Cleanup(func() {
		if !stopped {
			_ = ctrlC()
		}
	})
	waitRunning(t, out, done)
	banner := out.String()
	for _, a := range addresses(r.makeRun) {
		if !strings.Contains(banner, a) {
			t.Errorf("hallmark up's output does not name %s, which the README's make run paragraph does:\n%s", a, banner)
		}
	}
	version := checkVersions(t, dir, data, banner)

	start := time.Now()
	legoBlock(t, dir, lego, r.lego)
	t.Logf("the README's lego block took %v", time.Since(start).Round(100*time.Millisecond))
	legoCerts(t, filepath.Join(dir, "lego"))
	wantAlternate(t, filepath.Join(dir, "lego"))

	// make dies of the SIGINT, as in a terminal, once up has stopped the
	// frontend and the worker: every port is free again.
	if err := ctrlC(); err != nil && !strings.Contains(err.Error(), "interrupt") {
		t.Errorf("make run after Ctrl-C: %v\n%s", err, harness.Tail(out.String(), 3000))
	}
	if !strings.Contains(out.String(), "stopping the frontend and the worker") {
		t.Errorf("hallmark up did not say it stopped its processes:\n%s", harness.Tail(out.String(), 3000))
	}
	for _, p := range ports {
		if ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err != nil {
			t.Errorf("port %d is still taken after make run stopped: %v", p, err)
		} else {
			ln.Close()
		}
	}
	t.Logf("make run of %s passed", version)
}

// legoCerts: lego, in path, holds a certificate for each name the README
// gets one for (dns.localhost's, by dns-01 through the dev DNS's zone
// file, for its wildcard too); it keeps alpn.localhost's and moves
// test.localhost's, revoked last, into its archive.
func legoCerts(t *testing.T, path string) {
	t.Helper()
	for name, want := range map[string]string{"test.localhost": "test.localhost", "alpn.localhost": "alpn.localhost", "alt.localhost": "alt.localhost",
		"dns.localhost": "*.dns.localhost dns.localhost"} {
		found, _ := filepath.Glob(filepath.Join(path, "certificates", name+".crt"))
		archived, _ := filepath.Glob(filepath.Join(path, "archives", "*."+name+".crt"))
		if found = append(found, archived...); len(found) == 0 {
			t.Errorf("lego saved no certificate for %s", name)
		}
		for _, f := range found {
			names := harness.ReadCert(t, f).DNSNames
			slices.Sort(names)
			if strings.Join(names, " ") != want {
				t.Errorf("%s names %v, want %s", f, names, want)
			}
		}
	}
}

// wantAlternate: the chain lego saved for alt.localhost with
// --preferred-chain is the one to the dev cross root.
func wantAlternate(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(path, "certificates", "alt.localhost.crt"))
	if err != nil {
		t.Fatal(err)
	}
	var top *x509.Certificate
	for b, rest := pem.Decode(data); b != nil; b, rest = pem.Decode(rest) {
		if top, err = x509.ParseCertificate(b.Bytes); err != nil {
			t.Fatal(err)
		}
	}
	if top == nil || top.Issuer.CommonName != "Hallmark Development Root CA X2" {
		t.Errorf("lego's --preferred-chain saved a chain whose top is not issued by the cross root: %v", top)
	}
}

// waitRunning waits for up's banner; make builds the binaries first.
func waitRunning(t *testing.T, out *testproc.Buffer, done chan error) {
	t.Helper()
	deadline := time.After(5 * time.Minute)
	for !strings.Contains(out.String(), "Press Ctrl-C to stop.") {
		select {
		case err := <-done:
			t.Fatalf("make run exited before the CA was running: %v\n%s", err, out.String())
		case <-deadline:
			t.Fatalf("make run was not running within 5 minutes:\n%s", out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// checkVersions: `make version`, `git describe --tags --always --dirty`
// and `hallmark version` agree, the commit is HEAD's, the build date is
// RFC 3339; the frontend's and the worker's /healthz and the panel name
// the same version.
func checkVersions(t *testing.T, dir, data, banner string) string {
	t.Helper()
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(b))
	}
	describe, head := git("describe", "--tags", "--always", "--dirty"), git("rev-parse", "HEAD")
	mkv := exec.Command("make", "-s", "--no-print-directory", "version")
	mkv.Dir = repo
	b, err := mkv.Output()
	if err != nil || strings.TrimSpace(string(b)) != describe {
		t.Errorf("make version printed %q (%v), git describe %q", b, err, describe)
	}
	// A tagged tree describes itself as v1.2.3[-N-gHASH][-dirty]; an
	// untagged one as its abbreviated commit.
	if !regexp.MustCompile(`^(v\d+\.\d+\.\d+\S*|[0-9a-f]{7,}(-dirty)?)$`).MatchString(describe) {
		t.Errorf("git describe printed %q, neither v… nor a commit", describe)
	}
	v, err := exec.Command(filepath.Join(dir, "bin", "hallmark"), "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`^hallmark (\S+) \(commit ([0-9a-f]{40}), built (\S+), go\S+\)\n$`).FindStringSubmatch(string(v))
	if m == nil || m[1] != describe || m[2] != head {
		t.Fatalf("hallmark version printed %q, want %s at commit %s", v, describe, head)
	}
	if _, err := time.Parse(time.RFC3339, m[3]); err != nil {
		t.Errorf("build date %q: %v", m[3], err)
	}
	find := func(label string) string {
		mm := regexp.MustCompile(`(?m)^\s+` + label + `:\s+(\S+)`).FindStringSubmatch(banner)
		if mm == nil {
			t.Fatalf("hallmark up's output has no %q line:\n%s", label, banner)
		}
		return strings.TrimSuffix(mm[1], ",")
	}
	token, err := os.ReadFile(filepath.Join(data, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	client := harness.HTTPClient(t, filepath.Join(data, "ca", "root.pem"))
	for _, c := range []struct{ what, url, want string }{
		{"frontend /healthz", find("frontend health"), "hallmark-frontend " + describe + " (commit " + head},
		{"worker /healthz", find("worker health"), "hallmark-worker " + describe + " (commit " + head},
		{"admin panel", find("admin panel"), `<footer id="version">Hallmark ` + describe + " (commit " + head},
	} {
		req, _ := http.NewRequest(http.MethodGet, c.url, nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("%s at %s: %v", c.what, c.url, err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(c.want)) {
			t.Errorf("%s at %s: %d, does not say %q:\n%s", c.what, c.url, resp.StatusCode, c.want, harness.Tail(string(body), 1500))
		}
	}
	return describe
}

// legoBlock runs the README's lego lines in one bash, in dir (where
// hallmark-data is, as at the repository root after make run), with lego's
// --path /tmp/lego moved into dir: the only change made to them.
func legoBlock(t *testing.T, dir, lego string, lines []string) {
	t.Helper()
	script := "set -eu\n"
	for _, l := range lines {
		script += strings.ReplaceAll(l, "/tmp/lego", filepath.Join(dir, "lego")) + "\n"
	}
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(lego)+":"+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the README's lego block: %v\n%s\n%s", err, script, harness.Tail(string(out), 4000))
	}
}

// machineLock keeps other runs of this test (other worktrees) off make
// run's fixed ports until this one ends.
func machineLock(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "hallmark-make-run-test.lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
}

// portsFree fails (in CI) or skips when something else holds one of make
// run's ports, a make run of someone's own perhaps.
func portsFree(t *testing.T) {
	t.Helper()
	for _, p := range ports {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			if harness.Required() {
				t.Fatalf("port %d, which make run uses, is taken: %v", p, err)
			}
			t.Skipf("SKIPPING: port %d, which make run uses, is taken (a make run of your own?): %v", p, err)
		}
		ln.Close()
	}
}
