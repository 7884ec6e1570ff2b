package dist

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/tests/testproc"

	"github.com/hallmark-ca/hallmark/tests/harness"
)

// The paths the package owns on the machine.
const (
	etcDir   = "/etc/hallmark"
	stateDir = "/var/lib/hallmark"
	unitDir  = "/lib/systemd/system"
	// marker is written into stateDir by this test, so a later run may
	// remove a directory a crashed run left, and nothing else.
	marker = ".hallmark-dist-test"
)

// release is one `make dist` for the package's tests: dir holds what it
// made, built at date, which `make image` is given too, so that go build
// finds the binaries current rather than linking them again.
type release struct {
	dir, version, date string
}

var (
	releaseOnce sync.Once
	built       release
	buildErr    string
	releaseDir  string // removed by TestMain
)

// makeDist runs `make dist` once per test binary.
func makeDist(t *testing.T) release {
	t.Helper()
	releaseOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hallmark-dist-")
		if err != nil {
			buildErr = err.Error()
			return
		}
		releaseDir = dir
		date := time.Now().UTC().Format(time.RFC3339)
		start := time.Now()
		out, err := makeCmd("dist", "DIST="+dir, "BUILD_DATE="+date).CombinedOutput()
		if err != nil {
			buildErr = fmt.Sprintf("make dist: %v\n%s", err, out)
			return
		}
		t.Logf("make dist took %v", time.Since(start).Round(time.Second))
		v, err := makeCmd("-s", "version").Output()
		if err != nil {
			buildErr = fmt.Sprintf("make version: %v", err)
			return
		}
		built = release{dir: dir, version: strings.TrimSpace(string(v)), date: date}
		if !strings.Contains(string(out), "make dist: ") {
			buildErr = "make dist did not say what it built:\n" + string(out)
		}
	})
	if buildErr != "" {
		t.Fatal(buildErr)
	}
	return built
}

func makeCmd(args ...string) *exec.Cmd {
	cmd := exec.Command("make", append([]string{"--no-print-directory"}, args...)...)
	cmd.Dir = repo
	return cmd
}

func TestMain(m *testing.M) {
	code := m.Run()
	if releaseDir != "" {
		os.RemoveAll(releaseDir)
	}
	os.Exit(code)
}

// machineLock holds the machine for this test until it ends: the package
// and its user are machine-wide, and other worktrees run this test too.
func machineLock(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "hallmark-dist-test.lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
}

// run runs a command to completion and returns its combined output,
// failing the test unless it exits 0.
func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// installed reports whether dpkg has the hallmark package (installed or
// with its configuration left).
func installed() bool {
	out, err := exec.Command("dpkg-query", "-W", "-f", "${db:Status-Status}", "hallmark").Output()
	return err == nil && string(out) != "not-installed" && len(out) > 0
}

// cleanMachine purges a hallmark package and removes the state and the
// user a run of this test left; it refuses state it did not make.
func cleanMachine(t *testing.T) {
	t.Helper()
	if installed() {
		run(t, "/", "dpkg", "--purge", "hallmark")
	}
	if _, err := os.Stat(stateDir); err == nil {
		if _, err := os.Stat(filepath.Join(stateDir, marker)); err != nil {
			t.Fatalf("%s exists and this test did not make it: it may hold a CA's keys; move it away to run this test", stateDir)
		}
		if err := os.RemoveAll(stateDir); err != nil {
			t.Fatal(err)
		}
		if _, err := user.Lookup("hallmark"); err == nil {
			run(t, "/", "deluser", "--system", "hallmark")
		}
	}
}

// service is one of the units' ExecStart processes, run by command.
type service struct {
	name string
	cmd  *exec.Cmd
	out  *testproc.Buffer
	done chan struct{}
}

// start starts the unit's ExecStart as command builds it; it stops when
// the test ends, or with stop.
func start(t *testing.T, u unit) *service {
	t.Helper()
	s := &service{name: u.name, cmd: u.command(t), out: &testproc.Buffer{}, done: make(chan struct{})}
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", u.name, err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() { s.stop(t) })
	return s
}

// stop sends SIGTERM, as systemctl stop does, and waits; it fails the
// test if the process does not exit within TimeoutStopSec's 30 s.
func (s *service) stop(t *testing.T) {
	t.Helper()
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		t.Errorf("%s did not stop within 30 s of SIGTERM:\n%s", s.name, harness.Tail(s.out.String(), 3000))
	}
}

// exited reports whether the process has ended.
func (s *service) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}
