package redaction

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/store/redact"
	"github.com/hallmark-ca/hallmark/tests/harness"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }

// password is in every database URL; PostgreSQL's trust authentication
// accepts it, so the commands really run.
const password = "SuperSecret123"

// adminToken is the panel's token; no output may show it either.
const adminToken = "adm1n-t0ken-f0r-the-redaction-test"

// secrets are what no output may contain.
var secrets = []string{password, adminToken}

// withPassword puts password into a passwordless PostgreSQL URL.
func withPassword(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), password)
	return u.String()
}

// output is what one process printed, and how it ended.
type output struct {
	what string
	code int
	text string
}

// outputs gathers every process's output for the final scan.
type outputs struct {
	t   *testing.T
	all []output
}

// run runs a built binary with args in dir (extra environment env) for at
// most 60 s and keeps its combined output.
func (o *outputs) run(dir string, env []string, bin string, args ...string) output {
	o.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, harness.Bin(bin), args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "HALLMARK_CONFIG=", "HALLMARK_DATABASE_URL=", "HALLMARK_DEBUG=1"), env...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	// The label is masked itself: it names the URLs the run was given.
	out := output{what: redact.Text(bin + " " + strings.Join(args, " ") + " " + strings.Join(env, " ")), text: buf.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		out.code = ee.ExitCode()
	case err != nil:
		o.t.Fatalf("%s: %v", out.what, err)
	}
	o.all = append(o.all, out)
	return out
}

// file keeps a log file's content for the scan.
func (o *outputs) file(path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		o.t.Fatal(err)
	}
	o.all = append(o.all, output{what: path, text: string(b)})
}

// dir keeps every file under root but those that hold a secret by design
// (the configuration file, the token file) and SQLite's files.
func (o *outputs) dir(root string) {
	o.t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".toml") || strings.HasSuffix(p, ".token") || strings.Contains(filepath.Base(p), ".db") {
			return err
		}
		o.file(p)
		return nil
	})
	if err != nil {
		o.t.Fatal(err)
	}
}

// scan fails the test for every output that shows a secret.
func (o *outputs) scan() {
	o.t.Helper()
	for _, out := range o.all {
		if s := leaked(out.text); s != "" {
			o.t.Errorf("%s shows %q:\n%s", out.what, s, harness.Tail(out.text, 4000))
		}
	}
	o.t.Logf("scanned %d outputs and files", len(o.all))
}

// leaked is the secret text shows, or "".
func leaked(text string) string {
	for _, s := range secrets {
		if strings.Contains(text, s) {
			return s
		}
	}
	return ""
}

func TestLeakedFindsTheSecrets(t *testing.T) {
	if leaked("postgres://u:"+password+"@h") != password || leaked("token "+adminToken) != adminToken || leaked("postgres://u:xxxxx@h") != "" {
		t.Fatal("the scan would not catch a leak")
	}
}

// argsFor is how the test runs each command, its placeholders filled in
// (fill). Every command the binaries list must be here: a new command
// fails this test until it says how to run it.
var argsFor = map[string][]string{
	"hallmark migrate":                nil,
	"hallmark migrate status":         nil,
	"hallmark up":                     nil, // TestUpNeverPrintsThePassword
	"hallmark revoke":                 {"--dry-run", "{serial}"},
	"hallmark accounts":               nil,
	"hallmark accounts list":          nil,
	"hallmark accounts show":          {"{account}"},
	"hallmark accounts deactivate":    {"no-such-account"},
	"hallmark pauses":                 nil,
	"hallmark pauses list":            {"--all"},
	"hallmark pauses lift":            {"{account}"},
	"hallmark orders":                 nil,
	"hallmark orders list":            nil,
	"hallmark orders show":            {"{order}"},
	"hallmark certs":                  nil,
	"hallmark certs list":             nil,
	"hallmark certs show":             {"--pem", "{serial}"},
	"hallmark jobs":                   nil,
	"hallmark jobs list":              nil,
	"hallmark jobs show":              {"{job}"},
	"hallmark jobs retry":             {"{job}"},
	"hallmark jobs abandon":           {"999999999"},
	"hallmark issuers":                nil,
	"hallmark issuers list":           nil,
	"hallmark issuers create":         {"--name", "Redaction Intermediate"},
	"hallmark issuers rotate":         {"--profile", "default", "no-such-issuer"},
	"hallmark issuers retire":         {"no-such-issuer"},
	"hallmark crl":                    nil,
	"hallmark crl status":             nil,
	"hallmark crl restore":            {"--dry-run", "{dir}/no-such.crl"},
	"hallmark eab":                    nil,
	"hallmark eab create":             {"--label", "redaction"},
	"hallmark eab delete":             {"eab_no-such-key"},
	"hallmark eab list":               nil,
	"hallmark keys":                   nil,
	"hallmark keys block":             {"--cert", "{cert}", "--source", "redaction test"},
	"hallmark keys list":              nil,
	"hallmark keys unblock":           {"--cert", "{cert}", "--reason", "redaction test"},
	"hallmark keys show":              {"--cert", "{cert}"},
	"hallmark backup":                 {"{dir}/backup.db"},
	"hallmark ari":                    nil,
	"hallmark ari move":               {"--serial", "{serial}", "--reason", "redaction test"},
	"hallmark audit":                  nil,
	"hallmark audit list":             {"--since", "1h"},
	"hallmark audit verify":           nil,
	"hallmark audit export":           nil,
	"hallmark operators":              nil,
	"hallmark operators init-ca":      nil,
	"hallmark operators add":          {"--role", "viewer", "--out", "{dir}", "redaction-op"},
	"hallmark operators list":         nil,
	"hallmark operators revoke":       {"redaction-op"},
	"hallmark reload":                 {"--expect", "2", "--wait", "10s"},
	"hallmark policy":                 nil,
	"hallmark policy show":            nil,
	"hallmark policy explain":         {"--client-addr", "127.0.0.1", "--account", "{account}"},
	"hallmark version":                nil,
	"hallmark-frontend check-config":  nil,
	"hallmark-frontend version":       nil,
	"hallmark-worker version":         nil,
	"hallmark-worker check-config":    nil,
	"hallmark-worker ca":              nil,
	"hallmark-worker ca init":         {"--tls-cert", "frontend.pem", "--tls-key", "frontend.key"},
	"hallmark-worker ca intermediate": {"--name", "Redaction Intermediate W"},
	"hallmark-worker ca root-crl":     nil,
}

// longRunning are commands run in tests of their own.
var longRunning = map[string]bool{"hallmark up": true}

// onSQLite are commands that do their work only on SQLite (PostgreSQL has
// its own tools): they are also run, and must succeed, on an SQLite
// database.
var onSQLite = map[string]bool{"hallmark backup": true}

// fill replaces the placeholders of args with vals.
func fill(args []string, vals map[string]string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		for k, v := range vals {
			a = strings.ReplaceAll(a, "{"+k+"}", v)
		}
		out[i] = a
	}
	return out
}

// issue has lego obtain a certificate from ca and returns what argsFor's
// placeholders stand for: its serial and file, its order, account and a
// job, and a directory for files commands write.
func issue(t *testing.T, legoBin string, ca *harness.CA, o *outputs) map[string]string {
	t.Helper()
	legoDir := t.TempDir()
	name := "redaction.test"
	l := harness.Lego{Bin: legoBin, Directory: ca.BaseURL + "/directory", Root: ca.Root, Email: "ops@hallmark.test", Path: legoDir}
	if out, err := l.Run(context.Background(), "--domains", name, "--http", "--http.port", fmt.Sprintf("127.0.0.1:%d", ca.HTTPPort), "run"); err != nil {
		t.Fatalf("lego run: %v\n%s", err, out)
	}
	certFile := filepath.Join(legoDir, "certificates", name+".crt")
	vals := map[string]string{"dir": t.TempDir(), "cert": certFile,
		"serial": hex.EncodeToString(harness.ReadCert(t, certFile).SerialNumber.Bytes())}
	var orders []struct{ ID, Account string }
	if err := json.Unmarshal([]byte(o.run(ca.Dir, nil, "hallmark", "--config", ca.Config, "orders", "list", "--json").text), &orders); err != nil || len(orders) == 0 {
		t.Fatalf("orders list --json: %v %v", orders, err)
	}
	vals["order"], vals["account"] = orders[0].ID, orders[0].Account
	var jobs []struct{ ID int64 }
	if err := json.Unmarshal([]byte(o.run(ca.Dir, nil, "hallmark", "--config", ca.Config, "jobs", "list", "--json").text), &jobs); err != nil || len(jobs) == 0 {
		t.Fatalf("jobs list --json: %v %v", jobs, err)
	}
	vals["job"] = fmt.Sprint(jobs[0].ID)
	return vals
}

// TestNoOutputShowsThePassword starts a CA (frontend and worker, at debug
// level) on a PostgreSQL URL with a password and an admin panel, issues a
// certificate with lego, then runs every command of every binary three
// ways: on that database, on the same URL with nothing listening, and with
// a keyword/value DSN carrying the password; and the servers on the URL
// nothing listens on. No output and no file the CA wrote may show the
// password or the admin token.
func TestNoOutputShowsThePassword(t *testing.T) {
	legoBin := harness.RequireTool(t, "lego", "apt-get install lego")
	dbURL := withPassword(t, testdb.Postgres(t))
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "admin.token")
	if err := os.WriteFile(tokenFile, []byte(adminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ca := harness.StartCA(t, dbURL, harness.Options{Dir: dir, Env: []string{"HALLMARK_DEBUG=1"},
		Tables: fmt.Sprintf("[admin]\nlisten = \"127.0.0.1:%d\"\ntoken_file = %q\n", harness.FreePort(t), tokenFile)})
	o := &outputs{t: t}
	vals := issue(t, legoBin, ca, o)

	var all []string
	for _, bin := range []string{"hallmark", "hallmark-frontend", "hallmark-worker"} {
		all = append(all, commands(t, bin)...)
	}
	sqliteConfig := filepath.Join(t.TempDir(), "sqlite.toml")
	if err := os.WriteFile(sqliteConfig, []byte(fmt.Sprintf("[database]\nurl = %q\n", testdb.SQLite(t))), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := o.run(dir, nil, "hallmark", "--config", sqliteConfig, "migrate"); got.code != 0 {
		t.Fatalf("migrating the SQLite database: exit %d\n%s", got.code, got.text)
	}
	down := strings.Replace(dbURL, "127.0.0.1:5432", fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t)), 1)
	dsn := "host=127.0.0.1 user=postgres password=" + password + " dbname=postgres"
	for _, path := range all {
		args, ok := argsFor[path]
		if !ok {
			t.Errorf("%s is not in argsFor: say there how this test runs it", path)
			continue
		}
		if longRunning[path] {
			continue
		}
		words := strings.Fields(path)
		argv := append(append([]string{"--config", ca.Config}, words[1:]...), fill(args, vals)...)
		got := o.run(dir, nil, words[0], argv...)
		if got.code == 1 && words[0] == "hallmark" {
			t.Errorf("%s failed on the database it should reach (exit 1):\n%s", got.what, got.text)
		}
		o.run(dir, []string{"HALLMARK_DATABASE_URL=" + down}, words[0], argv...)
		o.run(dir, []string{"HALLMARK_DATABASE_URL=" + dsn}, words[0], argv...)
		if onSQLite[path] {
			argv[1] = sqliteConfig
			if got := o.run(dir, nil, words[0], argv...); got.code != 0 {
				t.Errorf("%s on SQLite: exit %d\n%s", got.what, got.code, got.text)
			}
		}
	}
	// The unreachable URL is printed, masked, where the testers saw it.
	if got := o.run(dir, []string{"HALLMARK_DATABASE_URL=" + down}, "hallmark", "migrate"); got.code != 1 || !strings.Contains(got.text, "postgres://postgres:xxxxx@127.0.0.1:") {
		t.Errorf("hallmark migrate on a URL nothing listens on: exit %d, want 1 and the URL masked:\n%s", got.code, got.text)
	}
	for _, bin := range []string{"hallmark-frontend", "hallmark-worker"} {
		if got := o.run(dir, []string{"HALLMARK_DATABASE_URL=" + down}, bin, "--config", ca.Config); got.code == 0 {
			t.Errorf("%s started on a database nothing listens on:\n%s", bin, got.text)
		}
	}
	ca.Stop("frontend")
	ca.Stop("worker")
	o.dir(dir)
	if len(o.all) < 3*len(argsFor) {
		t.Fatalf("only %d outputs gathered; the commands did not run", len(o.all))
	}
	o.scan()
}
