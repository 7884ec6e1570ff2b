package cli

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/hallmark-ca/hallmark/protocol/serverconf"
	"github.com/hallmark-ca/hallmark/worker/workerconf"
)

// up runs `hallmark up --data data` (with no worker binary beside this
// build, it goes no further than migrating) and returns its exit code and
// stderr.
func up(t *testing.T, data string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, "up", "--data", data, "--dns", "127.0.0.1:1")
	cmd.Env = append(os.Environ(), "HALLMARK_CONFIG=", "HALLMARK_DATABASE_URL=")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), errb.String()
}

// TestUpRefusesAnOpenDataDirectory: `hallmark up` on an existing data
// directory the group or others can reach refuses (exit 2), naming the
// directory and the chmod that fixes it, and writes nothing there.
func TestUpRefusesAnOpenDataDirectory(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []os.FileMode{0o755, 0o750, 0o701} {
		if err := os.Chmod(data, mode); err != nil {
			t.Fatal(err)
		}
		code, stderr := up(t, data)
		if code != 2 || !strings.Contains(stderr, data) || !strings.Contains(stderr, "chmod 700 "+data) {
			t.Errorf("mode %04o: exit %d, want 2 naming %s and `chmod 700 %s`:\n%s", mode, code, data, data, stderr)
		}
		if entries, _ := os.ReadDir(data); len(entries) != 0 {
			t.Fatalf("mode %04o: up wrote %v into a directory it refused", mode, entries)
		}
		if fi, _ := os.Stat(data); fi.Mode().Perm() != mode {
			t.Errorf("up changed the directory's mode to %04o", fi.Mode().Perm())
		}
	}
	// Fixed as told, up goes on: it writes its configuration and
	// migrates (then stops: this build has no worker binary).
	if err := os.Chmod(data, 0o700); err != nil {
		t.Fatal(err)
	}
	code, stderr := up(t, data)
	if code == 0 || strings.Contains(stderr, "chmod") || !strings.Contains(stderr, "hallmark-worker is missing") {
		t.Errorf("0700: exit %d, want it past the permission check to the missing worker:\n%s", code, stderr)
	}
}

// TestUpRefusesOpenKeyFiles: key files up finds the group or others can
// read (the frontend's TLS key, the admin token, the CA's keys) are
// refused, each named with its mode, before anything runs.
func TestUpRefusesOpenKeyFiles(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	code, stderr := up(t, data) // the first run makes data 0700 and writes hallmark.toml and the admin token
	if !strings.Contains(stderr, "hallmark-worker is missing") {
		t.Fatalf("first run: exit %d\n%s", code, stderr)
	}
	if err := os.MkdirAll(filepath.Join(data, "ca"), 0o700); err != nil {
		t.Fatal(err)
	}
	files := map[string]os.FileMode{
		"frontend.key": 0o644, "ca/intermediate.key": 0o640, "ca/root.key": 0o600, "admin.token": 0o604,
	}
	for name, mode := range files {
		p := filepath.Join(data, name)
		if err := os.WriteFile(p, []byte("secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	code, stderr = up(t, data)
	if code != 2 {
		t.Fatalf("exit %d, want 2:\n%s", code, stderr)
	}
	for name, mode := range files {
		p := filepath.Join(data, name)
		if named := strings.Contains(stderr, p+" ("); named != (mode != 0o600) {
			t.Errorf("%s (%04o) named: %v\n%s", name, mode, named, stderr)
		}
	}
	want := "chmod 600 " + filepath.Join(data, "admin.token") + " " + filepath.Join(data, "ca/intermediate.key") + " " + filepath.Join(data, "frontend.key")
	if !strings.Contains(stderr, want) {
		t.Errorf("stderr does not say %q:\n%s", want, stderr)
	}
}

// TestUpWritesLimits: the configuration `hallmark up` writes on first run
// sets the rate limits docs/operations.md recommends, leaves each
// account its default share of the validation slots, and passes the
// worker's own check, which up makes before it looks for the other
// binaries. Only the CLI is built here, so up stops after writing,
// checking and migrating, for want of hallmark-worker.
func TestUpWritesLimits(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	cmd := exec.Command(bin, "up", "--data", data)
	cmd.Env = append(os.Environ(), "HALLMARK_CONFIG=", "HALLMARK_DATABASE_URL=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err == nil || !strings.Contains(errb.String(), "hallmark-worker is missing") {
		t.Fatalf("hallmark up without hallmark-worker beside it: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	path := filepath.Join(data, "hallmark.toml")
	if !strings.Contains(out.String(), "wrote "+path) {
		t.Errorf("stdout %q does not say it wrote %s", out.String(), path)
	}
	cfg := struct {
		Limits serverconf.Limits `toml:"limits"`
		Worker workerconf.Worker `toml:"worker"`
	}{Worker: workerconf.DefaultWorker()}
	if _, err := toml.DecodeFile(path, &cfg); err != nil {
		t.Fatal(err)
	}
	l := cfg.Limits.WithDefaults()
	for _, c := range []struct {
		key       string
		got, want int
	}{
		{"orders_per_account", l.OrdersPerAccount, 300},
		{"orders_window_seconds", l.OrdersWindowSeconds, 3 * 3600},
		{"pending_authorizations_per_account", l.PendingAuthorizationsPerAccount, 300},
		{"failed_validations_per_hour", l.FailedValidationsPerHour, 5},
		{"certificates_per_domain", l.CertificatesPerDomain, 0},
	} {
		if c.got != c.want {
			t.Errorf("limits.%s = %d in the generated configuration, want %d", c.key, c.got, c.want)
		}
	}
	if s, want := cfg.Worker.ValidationAccountShare, workerconf.DefaultWorker().ValidationAccountShare; s != want {
		t.Errorf("worker.validation_account_share = %g, want the default %g", s, want)
	}
}
