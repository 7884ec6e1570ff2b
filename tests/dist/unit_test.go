package dist

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// unit is a systemd unit file read as systemd reads its keys: "Section.Key"
// to every value, in order ("Key=" with no value resets the list).
type unit struct {
	name string
	keys map[string][]string
}

func readUnit(t *testing.T, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unit{name: filepath.Base(path), keys: map[string][]string{}}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[' && line[len(line)-1] == ']':
			section = line[1 : len(line)-1]
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || strings.HasSuffix(line, `\`) {
				t.Fatalf("%s:%d: %q is not a Key=value line this test reads", path, n, line)
			}
			key := section + "." + strings.TrimSpace(k)
			if v = strings.TrimSpace(v); v == "" {
				u.keys[key] = []string{""}
			} else {
				u.keys[key] = append(u.keys[key], v)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// get is the key's last value ("" when unset).
func (u unit) get(key string) string {
	if vs := u.keys[key]; len(vs) > 0 {
		return vs[len(vs)-1]
	}
	return ""
}

// words are the space-separated words of every value of key.
func (u unit) words(key string) []string {
	var out []string
	for _, v := range u.keys[key] {
		out = append(out, strings.Fields(v)...)
	}
	return out
}

// execStart is the unit's one ExecStart as argv. It refuses what a split
// on spaces would get wrong (quotes, specifiers, variables, prefixes), so
// the argv is exactly what systemd runs.
func (u unit) execStart(t *testing.T) []string {
	t.Helper()
	vs := u.keys["Service.ExecStart"]
	if len(vs) != 1 {
		t.Fatalf("%s: %d ExecStart lines, want 1", u.name, len(vs))
	}
	if strings.ContainsAny(vs[0], "\"'%$\\") || strings.ContainsAny(vs[0][:1], "@-:+!|") {
		t.Fatalf("%s: ExecStart=%s uses quoting, specifiers or prefixes this test does not expand", u.name, vs[0])
	}
	return strings.Fields(vs[0])
}

// caps is a capability list of the unit as setpriv spells it:
// "-all,+net_bind_service".
func caps(list []string) string {
	out := "-all"
	for _, c := range list {
		out += ",+" + strings.ToLower(strings.TrimPrefix(c, "CAP_"))
	}
	return out
}

// command is what systemd would start for the unit's ExecStart, as near as
// can be done without systemd: as User= and Group= with the user's
// groups, with NoNewPrivileges=, the capability bounding and ambient sets,
// UMask=, WorkingDirectory=, and an environment of systemd's own plus
// EnvironmentFile=. The sandboxing (ProtectSystem= and the rest) needs
// systemd itself; systemd-analyze checks those keys instead.
func (u unit) command(t *testing.T) *exec.Cmd {
	t.Helper()
	user, group := u.get("Service.User"), u.get("Service.Group")
	if user == "" || group == "" {
		t.Fatalf("%s: no User= and Group=: it would run as root", u.name)
	}
	args := []string{"--reuid=" + user, "--regid=" + group, "--init-groups",
		"--bounding-set=" + caps(u.words("Service.CapabilityBoundingSet")),
		"--inh-caps=" + caps(u.words("Service.AmbientCapabilities")),
		"--ambient-caps=" + caps(u.words("Service.AmbientCapabilities"))}
	if u.get("Service.NoNewPrivileges") == "yes" {
		args = append(args, "--no-new-privs")
	}
	umask := u.get("Service.UMask")
	if umask == "" {
		umask = "0022"
	}
	args = append(args, "--", "/bin/sh", "-c", "umask "+umask+` && exec "$@"`, "sh")
	cmd := exec.Command("setpriv", append(args, u.execStart(t)...)...)
	cmd.Dir = u.get("Service.WorkingDirectory")
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8",
		"USER=" + user, "LOGNAME=" + user, "HOME=" + cmd.Dir, "SHELL=/usr/sbin/nologin"}
	for _, ef := range u.keys["Service.EnvironmentFile"] {
		path, optional := strings.CutPrefix(ef, "-")
		b, err := os.ReadFile(path)
		if optional && os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatalf("%s: EnvironmentFile=%s: %v", u.name, ef, err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if line = strings.TrimSpace(line); line != "" && line[0] != '#' {
				cmd.Env = append(cmd.Env, line)
			}
		}
	}
	return cmd
}

// hardening are the keys every Hallmark unit sets, and their values.
var hardening = map[string]string{
	"Service.NoNewPrivileges": "yes", "Service.ProtectSystem": "strict", "Service.ReadWritePaths": "/var/lib/hallmark",
	"Service.ProtectHome": "yes", "Service.PrivateTmp": "yes", "Service.PrivateDevices": "yes",
	"Service.RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX", "Service.RestrictNamespaces": "yes",
	"Service.SystemCallArchitectures": "native", "Service.MemoryDenyWriteExecute": "yes",
	"Service.User": "hallmark", "Service.Group": "hallmark", "Service.WorkingDirectory": "/var/lib/hallmark",
	"Service.EnvironmentFile": "-/etc/hallmark/hallmark.env",
}

// unitProblems checks the units in dir: each hardened, running as
// hallmark from /etc/hallmark/hallmark.toml; the frontend and the worker
// requiring and following the one-shot migration; no capability but the
// frontend's one to bind 443 and 80.
func unitProblems(t *testing.T, dir string) []string {
	t.Helper()
	var bad []string
	errorf := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	want := map[string]struct {
		argv []string
		caps []string
	}{
		"hallmark-migrate.service":  {[]string{"/usr/bin/hallmark", "--config", "/etc/hallmark/hallmark.toml", "migrate"}, nil},
		"hallmark-frontend.service": {[]string{"/usr/bin/hallmark-frontend", "--config", "/etc/hallmark/hallmark.toml"}, []string{"CAP_NET_BIND_SERVICE"}},
		"hallmark-worker.service":   {[]string{"/usr/bin/hallmark-worker", "--config", "/etc/hallmark/hallmark.toml"}, nil},
	}
	for name, w := range want {
		u := readUnit(t, filepath.Join(dir, name))
		if got := u.execStart(t); !slices.Equal(got, w.argv) {
			errorf("%s: ExecStart %q, want %q", name, got, w.argv)
		}
		for k, v := range hardening {
			if got := u.get(k); got != v {
				errorf("%s: %s=%q, want %q", name, k, got, v)
			}
		}
		if sc := u.keys["Service.SystemCallFilter"]; len(sc) == 0 || sc[0] != "@system-service" {
			errorf("%s: SystemCallFilter=%v, want @system-service first", name, sc)
		}
		for _, k := range []string{"Service.CapabilityBoundingSet", "Service.AmbientCapabilities"} {
			if _, set := u.keys[k]; !set || !slices.Equal(u.words(k), w.caps) {
				errorf("%s: %s=%v, want %v", name, k, u.words(k), w.caps)
			}
		}
		if name == "hallmark-migrate.service" {
			if u.get("Service.Type") != "oneshot" || u.get("Service.RemainAfterExit") != "yes" {
				errorf("%s: Type=%s RemainAfterExit=%s, want a one-shot that stays active", name, u.get("Service.Type"), u.get("Service.RemainAfterExit"))
			}
			continue
		}
		for _, k := range []string{"Unit.Requires", "Unit.After"} {
			if !slices.Contains(u.words(k), "hallmark-migrate.service") {
				errorf("%s: %s=%v lacks hallmark-migrate.service", name, k, u.words(k))
			}
		}
		if u.get("Install.WantedBy") != "multi-user.target" {
			errorf("%s: WantedBy=%q, want multi-user.target", name, u.get("Install.WantedBy"))
		}
	}
	entries, _ := filepath.Glob(filepath.Join(dir, "hallmark*.service"))
	if len(entries) != len(want) {
		errorf("%s holds %v, want exactly %d units", dir, entries, len(want))
	}
	return bad
}

// TestUnits checks deploy/systemd as the repository has it; the package
// test checks the installed copies the same way.
func TestUnits(t *testing.T) {
	t.Parallel()
	for _, p := range unitProblems(t, "../../deploy/systemd") {
		t.Error(p)
	}
}

// TestUnitChecksFail: the checks catch a worker unit that runs as root,
// one that does not wait for the migration, and one with a capability.
func TestUnitChecksFail(t *testing.T) {
	t.Parallel()
	for name, edit := range map[string][2]string{
		"as root":            {"User=hallmark\n", ""},
		"no migration first": {"Requires=hallmark-migrate.service\n", ""},
		"a capability":       {"CapabilityBoundingSet=\n", "CapabilityBoundingSet=CAP_SYS_ADMIN\n"},
	} {
		dir := t.TempDir()
		for _, u := range []string{"hallmark-migrate.service", "hallmark-frontend.service", "hallmark-worker.service"} {
			b, err := os.ReadFile(filepath.Join("../../deploy/systemd", u))
			if err != nil {
				t.Fatal(err)
			}
			if u == "hallmark-worker.service" {
				if !strings.Contains(string(b), edit[0]) {
					t.Fatalf("%s: %s lacks %q to edit", name, u, edit[0])
				}
				b = []byte(strings.Replace(string(b), edit[0], edit[1], 1))
			}
			if err := os.WriteFile(filepath.Join(dir, u), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if bad := unitProblems(t, dir); len(bad) == 0 {
			t.Errorf("%s: the checks found nothing wrong", name)
		}
	}
}
