package dist

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/tests/harness"
	"github.com/hallmark-ca/hallmark/tests/testdb"
	"github.com/hallmark-ca/hallmark/tests/testdns"
)

const repo = "../.."

// gate skips the test unless it may change this machine (CI, or
// HALLMARK_REQUIRE_TOOLS=1), and then fails for want of root or a tool.
func gate(t *testing.T) {
	t.Helper()
	if !harness.Required() {
		t.Skip("SKIPPING: the package test installs a Debian package on this machine; it runs in CI (CI=true) or with HALLMARK_REQUIRE_TOOLS=1, as root")
	}
	if os.Geteuid() != 0 {
		t.Fatal("the package test installs a Debian package: run it as root")
	}
	for _, tool := range [][2]string{{"dpkg", "dpkg"}, {"systemd-analyze", "apt-get install systemd"}, {"setpriv", "apt-get install util-linux"},
		{"adduser", "apt-get install adduser"}, {"lego", "apt-get install lego"}, {"make", "apt-get install make"}} {
		harness.RequireTool(t, tool[0], tool[1])
	}
}

// TestDebianPackage builds the release with `make dist`, installs the
// package, checks what it put where and its units, runs the units'
// ExecStart lines as the hallmark user against SQLite and then PostgreSQL
// until lego holds a certificate, and removes the package: the CA's state
// stays. The machine is left as it was.
func TestDebianPackage(t *testing.T) {
	gate(t)
	machineLock(t)
	cleanMachine(t)
	rel := makeDist(t)
	version := rel.version
	deb, tarball := artifact(t, rel.dir, "*.deb"), artifact(t, rel.dir, "*.tar.gz")
	checkTarball(t, tarball, version)

	t.Cleanup(func() { cleanMachine(t) })
	run(t, "/", "dpkg", "-i", deb)
	if err := os.WriteFile(filepath.Join(stateDir, marker), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	checkInstalled(t, version)
	for _, p := range unitProblems(t, unitDir) {
		t.Error(p)
	}
	verifyUnits(t)
	// The example configuration as shipped is valid for every binary,
	// read as the units read it: as the hallmark user.
	for _, bin := range []string{"hallmark-frontend", "hallmark-worker"} {
		if out, err := exec.Command("runuser", "-u", "hallmark", "--", bin, "--config", etcDir+"/hallmark.toml", "check-config").CombinedOutput(); err != nil {
			t.Errorf("%s check-config of the shipped %s/hallmark.toml as hallmark: %v\n%s", bin, etcDir, err, out)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) { issueThroughUnits(ctx, t, store, version) })
	}

	run(t, "/", "dpkg", "-r", "hallmark")
	for _, gone := range []string{"/usr/bin/hallmark", "/usr/bin/hallmark-frontend", "/usr/bin/hallmark-worker", unitDir + "/hallmark-worker.service"} {
		if _, err := os.Stat(gone); err == nil {
			t.Errorf("dpkg -r left %s", gone)
		}
	}
	for _, kept := range []string{stateDir + "/hallmark.db", stateDir + "/ca/root.pem", stateDir + "/ca/intermediate.key", etcDir + "/hallmark.toml"} {
		if _, err := os.Stat(kept); err != nil {
			t.Errorf("dpkg -r removed %s, which it must keep: %v", kept, err)
		}
	}
	run(t, "/", "dpkg", "--purge", "hallmark")
	if _, err := os.Stat(etcDir); err == nil {
		t.Errorf("dpkg --purge left %s", etcDir)
	}
	if _, err := os.Stat(stateDir + "/ca/intermediate.key"); err != nil {
		t.Errorf("dpkg --purge removed the CA's key: %v", err)
	}
}

// artifact is the one file in dir matching pattern.
func artifact(t *testing.T, dir, pattern string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, pattern))
	if len(m) != 1 {
		t.Fatalf("make dist made %v matching %s, want one", m, pattern)
	}
	return m[0]
}

// checkTarball: the release tarball holds the three binaries, the
// example configuration, the units and the docs under one directory named
// for the version.
func checkTarball(t *testing.T, path, version string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]int64{}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		have[h.Name] = h.Mode
	}
	top := "hallmark-" + version + "-linux-"
	for _, want := range []string{"bin/hallmark", "bin/hallmark-frontend", "bin/hallmark-worker", "deploy/hallmark.toml", "deploy/hallmark.env",
		"deploy/systemd/hallmark-frontend.service", "deploy/systemd/hallmark-worker.service", "deploy/systemd/hallmark-migrate.service",
		"README.md", "docs/operations.md"} {
		found := false
		for name, mode := range have {
			if strings.HasPrefix(name, top) && strings.HasSuffix(name, "/"+want) {
				found = true
				if strings.HasPrefix(want, "bin/") && mode&0o111 == 0 {
					t.Errorf("%s in the tarball is not executable (%o)", name, mode)
				}
			}
		}
		if !found {
			t.Errorf("the tarball lacks %s%s…/%s", top, "<arch>", want)
		}
	}
}

// checkInstalled: what dpkg -i put where, with which owners and modes,
// and that the installed binaries report the version make computed.
func checkInstalled(t *testing.T, version string) {
	t.Helper()
	u, err := user.Lookup("hallmark")
	if err != nil {
		t.Fatalf("the package made no hallmark user: %v", err)
	}
	if uid, _ := strconv.Atoi(u.Uid); uid >= 1000 || uid == 0 {
		t.Errorf("hallmark is uid %s, want a system user (1-999)", u.Uid)
	}
	if u.HomeDir != stateDir {
		t.Errorf("hallmark's home is %s, want %s", u.HomeDir, stateDir)
	}
	gid, _ := strconv.Atoi(u.Gid)
	uid, _ := strconv.Atoi(u.Uid)
	for _, c := range []struct {
		path       string
		uid, gid   int
		mode       os.FileMode
		executable bool
	}{
		{"/usr/bin/hallmark", 0, 0, 0o755, true},
		{"/usr/bin/hallmark-frontend", 0, 0, 0o755, true},
		{"/usr/bin/hallmark-worker", 0, 0, 0o755, true},
		{etcDir, 0, gid, 0o750, false},
		{etcDir + "/hallmark.toml", 0, gid, 0o640, false},
		{etcDir + "/hallmark.env", 0, gid, 0o640, false},
		{stateDir, uid, gid, 0o750, false},
		{unitDir + "/hallmark-frontend.service", 0, 0, 0o644, false},
		{"/usr/share/doc/hallmark/operations.md", 0, 0, 0o644, false},
	} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Errorf("after dpkg -i: %v", err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != c.mode || int(st.Uid) != c.uid || int(st.Gid) != c.gid {
			t.Errorf("%s is %d:%d %04o, want %d:%d %04o", c.path, st.Uid, st.Gid, fi.Mode().Perm(), c.uid, c.gid, c.mode)
		}
	}
	for _, bin := range []string{"hallmark", "hallmark-frontend", "hallmark-worker"} {
		out := run(t, "/", "/usr/bin/"+bin, "version")
		if !strings.HasPrefix(out, bin+" "+version+" (commit ") {
			t.Errorf("/usr/bin/%s version printed %q, want the version make computed, %q", bin, out, version)
		}
	}
}

var exposureRE = regexp.MustCompile(`Overall exposure level for (\S+): ([0-9.]+)`)

// verifyUnits runs systemd-analyze verify on the installed units (it
// loads them as systemd would and checks that their commands exist) and
// reports systemd-analyze security's exposure score of each.
func verifyUnits(t *testing.T) {
	t.Helper()
	units, _ := filepath.Glob(unitDir + "/hallmark-*.service")
	out, err := exec.Command("systemd-analyze", append([]string{"verify"}, units...)...).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify %v: %v\n%s", units, err, out)
	}
	for _, u := range units {
		out, _ := exec.Command("systemd-analyze", "security", "--offline=true", u).CombinedOutput()
		m := exposureRE.FindStringSubmatch(string(out))
		if m == nil {
			t.Errorf("systemd-analyze security %s printed no exposure level:\n%s", u, harness.Tail(string(out), 2000))
			continue
		}
		// systemd's scale: 0 is locked down, 10 unprotected; below 2 is "OK".
		if score, _ := strconv.ParseFloat(m[2], 64); score >= 2 {
			t.Errorf("%s: exposure %s, want under 2.0 (OK):\n%s", m[1], m[2], harness.Tail(string(out), 4000))
		}
		t.Logf("systemd-analyze security: %s exposure %s", m[1], m[2])
	}
}

// issueThroughUnits configures the installed CA for store on loopback
// ports, as an operator edits /etc/hallmark, creates the CA as the
// hallmark user (operations.md), runs the migration unit's ExecStart and
// then the worker's and the frontend's, and gets a certificate with lego.
func issueThroughUnits(ctx context.Context, t *testing.T, store, version string) {
	dbURL, env := "sqlite:"+stateDir+"/hallmark.db", ""
	if store == "postgres" {
		env = "HALLMARK_DATABASE_URL=" + testdb.Postgres(t) + "\n"
	}
	dns := testdns.Start(t)
	port := func() int { return harness.FreePort(t) }
	listen, health, httpPort := fmt.Sprintf("127.0.0.1:%d", port()), fmt.Sprintf("127.0.0.1:%d", port()), port()
	conf := fmt.Sprintf(`[database]
url = %q
[server]
listen = %q
public_http_listen = "127.0.0.1:%d"
tls_cert = "%[4]s/frontend.pem"
tls_key = "%[4]s/frontend.key"
[worker]
health_listen = %q
[challenge]
resolvers = [%q]
http_port = %d
[ca]
dir = "%[4]s/ca"
`, dbURL, listen, port(), stateDir, health, dns.Addr, httpPort)
	writeEtc(t, "hallmark.toml", conf)
	writeEtc(t, "hallmark.env", env)
	if store == "sqlite" {
		run(t, "/", "runuser", "-u", "hallmark", "--", "hallmark-worker", "--config", etcDir+"/hallmark.toml", "ca", "init",
			"--tls-cert", stateDir+"/frontend.pem", "--tls-key", stateDir+"/frontend.key", "--tls-names", "127.0.0.1,localhost")
	}
	units := map[string]unit{}
	for _, n := range []string{"migrate", "worker", "frontend"} {
		units[n] = readUnit(t, unitDir+"/hallmark-"+n+".service")
	}
	m := start(t, units["migrate"])
	<-m.done
	if code := m.cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(m.out.String(), "database is up to date") {
		t.Fatalf("the migration unit's ExecStart exited %d:\n%s", code, m.out.String())
	}
	worker, frontend := start(t, units["worker"]), start(t, units["frontend"])
	root := stateDir + "/ca/root.pem"
	deadline := time.Now().Add(30 * time.Second)
	if !harness.WaitOK(harness.HTTPClient(t, root), "https://"+listen+"/directory", deadline) ||
		!harness.WaitOK(http.DefaultClient, "http://"+health+"/healthz", deadline) {
		t.Fatalf("the CA did not answer within 30 s\nworker (exited %v):\n%s\nfrontend (exited %v):\n%s",
			worker.exited(), harness.Tail(worker.out.String(), 3000), frontend.exited(), harness.Tail(frontend.out.String(), 3000))
	}
	for _, u := range []string{"https://" + listen + "/healthz", "http://" + health + "/healthz"} {
		if body := get(t, root, u); !strings.Contains(body, " "+version+" (commit ") {
			t.Errorf("%s does not name version %s:\n%s", u, version, body)
		}
	}
	lego := harness.Lego{Bin: "lego", Directory: "https://" + listen + "/directory", Root: root, Email: "dist@example.com", Path: t.TempDir()}
	name := "dist-" + store + ".localhost"
	if out, err := lego.Run(ctx, "--domains", name, "--http", "--http.port", fmt.Sprintf("127.0.0.1:%d", httpPort), "run"); err != nil {
		t.Fatalf("lego: %v\n%s\nworker:\n%s", err, out, harness.Tail(worker.out.String(), 3000))
	}
	if c := harness.ReadCert(t, filepath.Join(lego.Path, "certificates", name+".crt")); !slices.Equal(c.DNSNames, []string{name}) {
		t.Errorf("certificate for %v, want %s", c.DNSNames, name)
	}
	status := start(t, unit{name: "hallmark migrate status", keys: withExec(units["migrate"], "/usr/bin/hallmark --config /etc/hallmark/hallmark.toml migrate status")})
	<-status.done
	if !strings.Contains(status.out.String(), "migrated by hallmark "+version+" (commit ") {
		t.Errorf("migrate status does not name the installed release %s:\n%s", version, status.out.String())
	}
	worker.stop(t)
	frontend.stop(t)
}

// withExec is u's keys with another ExecStart: a command run as the unit
// would run it.
func withExec(u unit, execStart string) map[string][]string {
	keys := map[string][]string{}
	for k, v := range u.keys {
		keys[k] = v
	}
	keys["Service.ExecStart"] = []string{execStart}
	return keys
}

// writeEtc writes an operator's file in /etc/hallmark, keeping the owner
// and mode the package gave it.
func writeEtc(t *testing.T, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(etcDir, name), []byte(body), 0o640); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, root, u string) string {
	t.Helper()
	resp, err := harness.HTTPClient(t, root).Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
