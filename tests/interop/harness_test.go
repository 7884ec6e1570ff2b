// Package interop proves that the ACME clients people actually use —
// certbot, lego, dehydrated and uacme, the Debian packages — get, renew and
// revoke certificates from the real hallmark-frontend and hallmark-worker
// binaries, over every challenge type, against every store, and that the
// failures a user can cause reach the client as the right ACME problem.
//
// The suite prints its matrix (one line per client, scenario, store and
// signing backend) from TestMain. `go test ./...` hides a passing package's
// output, so the matrix is also written to $HALLMARK_INTEROP_MATRIX when set;
// `make test` sets it and prints the file.
//
// The test binary doubles as the clients' DNS hook (certbot's
// --manual-auth-hook, lego's exec provider, dehydrated's and uacme's hook
// programs, and uacme's http-01 hook): run with HALLMARK_INTEROP_HOOK=1 it
// posts the TXT record to the test's control endpoint, which puts it in the
// loopback DNS server the worker resolves through.
package interop

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/tests/harness"
	"github.com/hallmark-ca/hallmark/tests/testdns"
)

func TestMain(m *testing.M) {
	if os.Getenv("HALLMARK_INTEROP_HOOK") == "1" {
		os.Exit(runHook(os.Args[1:]))
	}
	os.Exit(runSuite(m))
}

// runSuite builds the binaries, runs the tests and prints the matrix.
func runSuite(m *testing.M) int {
	// The binaries, or the prebuilt ones HALLMARK_TEST_BIN_DIR names.
	cleanup, err := harness.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	// Each cell (client × store × backend) mostly waits on a client
	// process and the CA's polling; run all of them at once rather than
	// GOMAXPROCS at a time, unless -parallel was given.
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", fmt.Sprint(len(stores)*len(backends)*len(clients)))
	}
	code := m.Run()
	printMatrix()
	return code
}

// clients are the ACME clients the suite drives, one Test function each.
var clients = []string{"certbot", "lego", "dehydrated", "uacme"}

var (
	requireTool = harness.RequireTool
	readCert    = harness.ReadCert
	tail        = harness.Tail
	// stores are the databases every client runs against.
	stores = harness.Dialects
)

// backends are the signing backends every client runs against. setup
// prepares the backend in the CA's directory before `ca init` and returns
// top-level configuration keys, configuration tables, extra `ca init`
// arguments and environment for the CA's processes.
var backends = []struct {
	name  string
	setup func(t *testing.T, dir string) caBackend
}{
	// The local CA has a second root that cross-signs its intermediate:
	// every certificate has an alternate chain (the preferred-chain cells).
	{"local", func(*testing.T, string) caBackend { return caBackend{initArgs: []string{"--cross-root"}} }},
	{"pkcs11", softHSM},
}

// caBackend is what a signing backend adds to a CA's configuration.
type caBackend struct {
	top, tables string   // TOML before the first table, and further tables
	issuer      string   // the issuing certificate, relative to the CA's directory
	initArgs    []string // for `hallmark-worker ca init`
	env         []string // for every CA process
}

// softHSM initialises a SoftHSM2 token in dir and makes a profile signed
// by a key on it the default: every certificate in the cell comes from
// signer/pkcs11 through crypto11.
func softHSM(t *testing.T, dir string) caBackend {
	t.Helper()
	util := requireTool(t, "softhsm2-util", "apt-get install softhsm2")
	module := "/usr/lib/softhsm/libsofthsm2.so"
	if p := os.Getenv("HALLMARK_PKCS11_MODULE"); p != "" {
		module = p
	}
	if _, err := os.Stat(module); err != nil {
		if harness.Required() {
			t.Fatalf("the SoftHSM2 module is required here (CI): %v", err)
		}
		t.Skipf("SKIPPING: the SoftHSM2 module %s is missing (apt-get install softhsm2)", module)
	}
	tokens := filepath.Join(dir, "softhsm-tokens")
	if err := os.Mkdir(tokens, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "softhsm2.conf")
	if err := os.WriteFile(conf, []byte("directories.tokendir = "+tokens+"\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"SOFTHSM2_CONF=" + conf, "HALLMARK_INTEROP_PIN=123456"}
	cmd := exec.Command(util, "--init-token", "--free", "--label", "hallmark-interop", "--pin", "123456", "--so-pin", "654321")
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("softhsm2-util --init-token: %v\n%s", err, out)
	}
	return caBackend{
		top: "default_profile = \"hsm\"\n",
		tables: fmt.Sprintf(`
[backends.hsm]
type = "pkcs11"
module = %q
token_label = "hallmark-interop"
pin_env = "HALLMARK_INTEROP_PIN"
key_label = "hallmark-interop-issuer"
cert = "hsm-issuer.pem"

[profiles.hsm]
description = "90-day TLS server certificate, key on a PKCS#11 token"
backend = "pkcs11"
signer = "hsm"
validity_hours = 2160
key_types = ["rsa2048", "rsa3072", "rsa4096", "p256", "p384"]
challenges = ["http-01", "dns-01", "tls-alpn-01"]
identifier_types = ["dns", "ip"]
allow_wildcards = true
key_usages = ["digitalSignature", "keyEncipherment"]
ext_key_usages = ["serverAuth"]
`, module),
		issuer:   "hsm-issuer.pem",
		initArgs: []string{"--pkcs11", "hsm"},
		env:      env,
	}
}

// deniedDomain is outside the CA's policy in every configuration here.
const deniedDomain = "denied.test"

// otherCA is a CAA issuer that is not Hallmark.
const otherCA = "other-ca.test"

// CA is a running Hallmark (see harness.CA) with a control endpoint the
// clients' DNS hooks post TXT records to.
type CA struct {
	*harness.CA
	HookURL string // the TXT control endpoint
	Issuer  string // when set, the PEM certificate every leaf must be signed by
}

// startCA starts a CA on the store at dbURL with the signing backend
// backend prepares in its directory; everything stops when the test ends.
func startCA(t *testing.T, dbURL string, backend func(t *testing.T, dir string) caBackend) *CA {
	t.Helper()
	dir := t.TempDir()
	be := backend(t, dir)
	ca := &CA{CA: harness.StartCA(t, dbURL, harness.Options{
		Dir: dir,
		Top: be.top,
		Tables: fmt.Sprintf(`
[policy]
deny_domains = [%q]
%s`, deniedDomain, be.tables),
		InitArgs: be.initArgs,
		Env:      be.env,
	})}
	ca.HookURL = startTXTControl(t, ca.DNS)
	if be.issuer != "" {
		ca.Issuer = filepath.Join(dir, be.issuer)
	}
	return ca
}

// hookEnv is the environment a client needs to run the test binary as its
// DNS hook against this CA's control endpoint.
func (ca *CA) hookEnv() []string {
	return []string{"HALLMARK_INTEROP_HOOK=1", "HALLMARK_INTEROP_HOOK_URL=" + ca.HookURL}
}

// hookPath is this test binary, which acts as the hook (see runHook).
func hookPath(t *testing.T) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startTXTControl serves POST /txt?op=add|del&name=N&value=V on loopback
// and keeps dns's TXT records in step: a name can hold several values at
// once (a wildcard and its base name share _acme-challenge).
func startTXTControl(t *testing.T, dns *testdns.Server) string {
	t.Helper()
	var mu sync.Mutex
	records := map[string][]string{}
	mux := http.NewServeMux()
	mux.HandleFunc("/txt", func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimSuffix(strings.ToLower(r.FormValue("name")), ".")
		value := r.FormValue("value")
		if name == "" || value == "" {
			http.Error(w, "name and value are required", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		vals := records[name]
		switch r.FormValue("op") {
		case "add":
			vals = append(vals, value)
		case "del":
			kept := vals[:0]
			for _, v := range vals {
				if v != value {
					kept = append(kept, v)
				}
			}
			vals = kept
		default:
			http.Error(w, "op must be add or del", http.StatusBadRequest)
			return
		}
		records[name] = vals
		dns.SetTXT(name, vals...)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// runHook is the test binary acting as a client's DNS hook:
//
//	certbot-auth | certbot-cleanup   (CERTBOT_DOMAIN, CERTBOT_VALIDATION in the environment)
//	present | cleanup FQDN VALUE     (lego's exec provider; "timeout" is answered with nothing)
//	noop                             (certbot --manual for http-01 when the test serves the answer)
//	dehydrated HOOK ARGS...          (dehydrated's --hook, through hookWrapper)
//	uacme METHOD TYPE IDENT TOKEN AUTH (uacme's --hook, through hookWrapper)
func runHook(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "hook: no mode")
		return 2
	}
	var op, name, value string
	switch args[0] {
	case "noop", "timeout":
		return 0
	case "dehydrated":
		// dehydrated calls one hook program for every event
		// (deploy_cert, exit_hook, ...; it probes with a made-up name
		// before it starts) and requires a hook to exit 0 on the ones it
		// does not handle. Its dns-01 events carry DOMAIN TOKEN_FILENAME
		// TOKEN_VALUE, TOKEN_VALUE being the TXT record's value.
		if len(args) < 2 {
			fmt.Fprintln(os.Stderr, "hook: dehydrated wants a hook name")
			return 2
		}
		switch args[1] {
		case "deploy_challenge", "clean_challenge":
			if len(args) != 5 {
				fmt.Fprintf(os.Stderr, "hook: dehydrated %s wants DOMAIN TOKEN_FILENAME TOKEN_VALUE, got %q\n", args[1], args[2:])
				return 2
			}
			op = map[string]string{"deploy_challenge": "add", "clean_challenge": "del"}[args[1]]
			name, value = "_acme-challenge."+args[2], args[4]
		default:
			return 0
		}
	case "uacme":
		return uacmeHook(args[1:])
	case "certbot-auth", "certbot-cleanup":
		op = map[string]string{"certbot-auth": "add", "certbot-cleanup": "del"}[args[0]]
		name, value = "_acme-challenge."+os.Getenv("CERTBOT_DOMAIN"), os.Getenv("CERTBOT_VALIDATION")
	case "present", "cleanup":
		if len(args) != 3 {
			fmt.Fprintf(os.Stderr, "hook: %s wants FQDN VALUE, got %q\n", args[0], args[1:])
			return 2
		}
		op = map[string]string{"present": "add", "cleanup": "del"}[args[0]]
		name, value = args[1], args[2]
	default:
		fmt.Fprintf(os.Stderr, "hook: unknown mode %q\n", args[0])
		return 2
	}
	return postTXT(op, name, value)
}

// postTXT asks the test's control endpoint to add or delete (op) the TXT
// record value at name, and returns the hook's exit code.
func postTXT(op, name, value string) int {
	resp, err := http.PostForm(os.Getenv("HALLMARK_INTEROP_HOOK_URL")+"/txt", url.Values{"op": {op}, "name": {name}, "value": {value}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "hook: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		fmt.Fprintf(os.Stderr, "hook: %s: %s\n", resp.Status, b)
		return 1
	}
	return 0
}

// uacmeHook answers uacme's hook calls: METHOD (begin, done, failed) TYPE
// IDENT TOKEN AUTH, AUTH being for dns-01 the TXT record's value already.
// uacme offers each of an authorization's challenges in turn and takes the
// first one the hook accepts (exit 0) at begin, so the test picks the type
// with HALLMARK_INTEROP_CHALLENGE and declines the others. An accepted
// http-01 answer is written to the directory HALLMARK_INTEROP_WEBROOT,
// which the test serves on the worker's http-01 port.
func uacmeHook(args []string) int {
	if len(args) != 5 {
		fmt.Fprintf(os.Stderr, "hook: uacme wants METHOD TYPE IDENT TOKEN AUTH, got %q\n", args)
		return 2
	}
	method, typ, ident, token, auth := args[0], args[1], args[2], args[3], args[4]
	if typ != os.Getenv("HALLMARK_INTEROP_CHALLENGE") {
		return 1 // declined: uacme offers the next challenge
	}
	switch typ {
	case "dns-01":
		op := "add"
		if method != "begin" {
			op = "del"
		}
		return postTXT(op, "_acme-challenge."+ident, auth)
	case "http-01":
		if token == "" || filepath.Base(token) != token || strings.HasPrefix(token, ".") {
			fmt.Fprintf(os.Stderr, "hook: token %q is not a file name\n", token)
			return 1
		}
		p := filepath.Join(os.Getenv("HALLMARK_INTEROP_WEBROOT"), token)
		var err error
		if method == "begin" {
			err = os.WriteFile(p, []byte(auth), 0o644)
		} else {
			err = os.Remove(p)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "hook: %v\n", err)
			return 1
		}
		return 0
	}
	return 1
}

// hookWrapper writes an executable script that runs this test binary as a
// hook in mode: dehydrated and uacme execute their hook program by path
// with no arguments of the test's own, so the mode has to be in a file.
func hookWrapper(t *testing.T, mode string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), mode+"-hook")
	script := fmt.Sprintf("#!/bin/sh\nexec '%s' %s \"$@\"\n", hookPath(t), mode)
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}
