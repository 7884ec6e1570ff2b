package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// target is a CA the orchestrator started: where its directory is, what
// to trust, which processes to measure, and how to stop it.
type target struct {
	Label     string
	Directory string
	Roots     *x509.CertPool
	RootPEM   []byte // Roots as PEM, for a client to trust
	Procs     procSet
	// DBURL is Hallmark's PostgreSQL database, "" otherwise.
	DBURL string
	// Profiles maps a process group to its pprof listener.
	Profiles map[string]string
	stop     func()
}

// profile saves a CPU profile of every process of t with a pprof listener,
// taken over the next seconds, as <dir>/<label>-<group>.pprof; it returns
// at once and the returned function waits for the files.
func (t *target) profile(ctx context.Context, dir, label string, seconds int) func() {
	done := make(chan struct{}, len(t.Profiles))
	for group, addr := range t.Profiles {
		go func(group, addr string) {
			defer func() { done <- struct{}{} }()
			u := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, seconds)
			var resp *http.Response
			var err error
			// The worker may open its listener a moment after the
			// frontend answers.
			for try := 0; try < 50; try++ {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
				if resp, err = http.DefaultClient.Do(req); err == nil {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "profiling %s: %v\n", group, err)
				return
			}
			defer resp.Body.Close()
			f, err := os.Create(filepath.Join(dir, strings.ReplaceAll(label, " ", "-")+"-"+group+".pprof"))
			if err != nil {
				fmt.Fprintf(os.Stderr, "profiling %s: %v\n", group, err)
				return
			}
			defer f.Close()
			_, _ = io.Copy(f, resp.Body)
		}(group, addr)
	}
	return func() {
		for range t.Profiles {
			<-done
		}
	}
}

// benchEnv is what every target shares: the binaries, the generator's
// responders, and where to keep files.
type benchEnv struct {
	BinDir      string
	Pebble      string
	StepCA      string
	PostgresURL string // admin URL; a fresh database is created per run
	WorkDir     string
	Resp        *responders
	// HTTPPort is the port every CA validates http-01 on: the responder's
	// under load, the client's own listener in clients mode.
	HTTPPort int
	Keep     bool // keep the work directory and logs
	Log      io.Writer
	// Server tuning.
	WorkerConcurrency int
	MaxConns          int
	RetryAfterSeconds int
	VerdictWaitMS     int    // server.verdict_wait_ms; below 0: Hallmark's default
	ExtraConfig       string // appended to Hallmark's configuration
	// Perspectives is how many perspective workers hallmark-postgres-persp
	// starts.
	Perspectives int
	// ProfileDir, when set, makes the frontend and worker serve pprof and
	// each run save ProfileSeconds of CPU profile of both there.
	ProfileDir     string
	ProfileSeconds int
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// freePorts are n loopback ports free a moment ago.
func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		var err error
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	return ports, nil
}

// hallmarkPorts are the listeners of a Hallmark the orchestrator starts.
type hallmarkPorts struct {
	listen, publicHTTP, health int
	pprofServer, pprofWorker   string // "" unless profiling
}

// startHallmark writes a configuration, creates the database (a fresh
// PostgreSQL database, or a SQLite file), migrates, creates the CA and
// starts hallmark-worker and hallmark-frontend, and with perspectives > 0
// that many perspective workers whose corroboration every validation
// needs (perspectives.go).
func (e *benchEnv) startHallmark(ctx context.Context, storeKind, backend string, perspectives int) (*target, error) {
	dir, err := os.MkdirTemp(e.WorkDir, "hallmark-"+storeKind+"-")
	if err != nil {
		return nil, err
	}
	var cleanups []func()
	t := &target{Label: fmt.Sprintf("hallmark %s %s", storeKind, backend)}
	t.stop = func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
		if !e.Keep {
			os.RemoveAll(dir)
		}
	}
	fail := func(err error) (*target, error) { t.stop(); return nil, err }

	dbURL := "sqlite:" + filepath.Join(dir, "hallmark.db")
	if storeKind == "postgres" {
		u, drop, err := createDatabase(ctx, e.PostgresURL)
		if err != nil {
			return fail(err)
		}
		cleanups = append(cleanups, drop)
		dbURL, t.DBURL = u, u
		t.Procs.pgDatabase, t.Procs.pgAdmin = strings.TrimPrefix(mustURL(u).Path, "/"), e.PostgresURL
	}
	ports, err := e.hallmarkPorts(t)
	if err != nil {
		return fail(err)
	}
	top, tables, initArgs, env := "", "", []string(nil), []string(nil)
	switch backend {
	case "local":
	case "pkcs11":
		if top, tables, initArgs, env, err = softHSM(dir); err != nil {
			return fail(err)
		}
	default:
		return fail(fmt.Errorf("backend %q: local or pkcs11", backend))
	}
	if perspectives > 0 {
		if storeKind != "postgres" || backend != "local" {
			return fail(fmt.Errorf("perspectives need PostgreSQL and the local key (a SQLite file has one host)"))
		}
		tables = perspectiveTables(perspectives)
		t.Label += fmt.Sprintf(" + %d perspectives", perspectives)
	}
	cfgPath := filepath.Join(dir, "hallmark.toml")
	if err := os.WriteFile(cfgPath, []byte(top+e.hallmarkConfig(dbURL, ports, tables)), 0o644); err != nil {
		return fail(err)
	}
	if err := e.initHallmark(ctx, dir, env, cfgPath, initArgs); err != nil {
		return fail(err)
	}
	t.Procs.pids = map[string][]int{}
	for _, which := range []string{"worker", "frontend"} {
		pid, stop, err := e.startProcess(dir, which+".log", env, filepath.Join(e.BinDir, "hallmark-"+which), "--config", cfgPath)
		if err != nil {
			return fail(err)
		}
		cleanups = append(cleanups, stop)
		t.Procs.pids[which] = []int{pid}
	}
	if err := waitHallmark(ctx, t, dir, ports); err != nil {
		return fail(err)
	}
	for i := 1; i <= perspectives; i++ {
		stop, err := e.startPerspective(ctx, t, dir, dbURL, ports, top, tables, perspectiveName(i))
		if stop != nil {
			cleanups = append(cleanups, stop)
		}
		if err != nil {
			return fail(err)
		}
	}
	return t, nil
}

// hallmarkPorts picks the listeners' ports, and the pprof listeners when
// the run profiles (t.Profiles).
func (e *benchEnv) hallmarkPorts(t *target) (hallmarkPorts, error) {
	free, err := freePorts(5)
	if err != nil {
		return hallmarkPorts{}, err
	}
	p := hallmarkPorts{listen: free[0], publicHTTP: free[1], health: free[2]}
	if e.ProfileDir != "" {
		p.pprofServer, p.pprofWorker = fmt.Sprintf("127.0.0.1:%d", free[3]), fmt.Sprintf("127.0.0.1:%d", free[4])
		t.Profiles = map[string]string{"frontend": p.pprofServer, "worker": p.pprofWorker}
	}
	return p, nil
}

// hallmarkConfig is the configuration file but for the top-level keys,
// with tables (a signing backend's) and e.ExtraConfig appended.
func (e *benchEnv) hallmarkConfig(dbURL string, p hallmarkPorts, tables string) string {
	workerConcurrency := "" // the configuration's default
	if e.WorkerConcurrency > 0 {
		workerConcurrency = fmt.Sprintf("concurrency = %d\n", e.WorkerConcurrency)
	}
	verdictWait := "" // the configuration's default
	if e.VerdictWaitMS >= 0 {
		verdictWait = fmt.Sprintf("verdict_wait_ms = %d\n", e.VerdictWaitMS)
	}
	return fmt.Sprintf(`[database]
url = %q
max_conns = %d

[server]
listen = "127.0.0.1:%d"
tls_cert = "frontend.pem"
tls_key = "frontend.key"
public_http_listen = "127.0.0.1:%d"
caa_identities = ["hallmark.test"]
retry_after_seconds = %d
max_concurrent_requests = 1024
pprof_listen = %q
%s
[worker]
%shealth_listen = "127.0.0.1:%d"
pprof_listen = %q

[challenge]
resolvers = [%q]
http_port = %d
timeout_ms = 5000

[ca]
dir = "ca"
%s
%s`, dbURL, e.MaxConns, p.listen, p.publicHTTP, e.RetryAfterSeconds, p.pprofServer, verdictWait, workerConcurrency, p.health, p.pprofWorker,
		e.Resp.DNSAddr, e.HTTPPort, tables, e.ExtraConfig)
}

// initHallmark migrates the database and creates the CA, as an operator
// does before starting the servers.
func (e *benchEnv) initHallmark(ctx context.Context, dir string, env []string, cfgPath string, initArgs []string) error {
	run := func(bin string, args ...string) error {
		cmd := exec.CommandContext(ctx, filepath.Join(e.BinDir, bin), args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := run("hallmark", "--config", cfgPath, "migrate"); err != nil {
		return err
	}
	return run("hallmark-worker", append([]string{"--config", cfgPath, "ca", "init", "--tls-cert", "frontend.pem", "--tls-key", "frontend.key"}, initArgs...)...)
}

// waitHallmark trusts the new CA's root and waits for the frontend's
// directory and the worker's readiness.
func waitHallmark(ctx context.Context, t *target, dir string, p hallmarkPorts) error {
	root, err := os.ReadFile(filepath.Join(dir, "ca", "root.pem"))
	if err != nil {
		return err
	}
	t.Roots = x509.NewCertPool()
	t.Roots.AppendCertsFromPEM(root)
	t.RootPEM = root
	t.Directory = fmt.Sprintf("https://127.0.0.1:%d/directory", p.listen)
	if err := waitDirectory(ctx, t); err != nil {
		return fmt.Errorf("%w (logs in %s)", err, dir)
	}
	// A worker that could not start (a port taken between freePort and its
	// bind, say) would leave the run polling until --timeout: wait until it
	// says it is ready, or fail with its log.
	if err := waitReady(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", p.health)); err != nil {
		logText, _ := os.ReadFile(filepath.Join(dir, "worker.log"))
		return fmt.Errorf("hallmark-worker: %w; its log:\n%s", err, tail(logText, 2000))
	}
	return nil
}

// waitReady polls url until it answers 200, for 30 s at most.
func waitReady(ctx context.Context, url string) error {
	return waitOK(ctx, http.DefaultClient, url)
}

func waitOK(ctx context.Context, hc *http.Client, url string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := hc.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("%s did not answer 200 within 30s", url)
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// startPebble runs Let's Encrypt's Pebble with the generator's DNS server
// and http-01 port, no validation sleep and no random nonce rejection.
func (e *benchEnv) startPebble(ctx context.Context) (*target, error) {
	if e.Pebble == "" {
		return nil, fmt.Errorf("no pebble binary: GOBIN=<dir> go install github.com/letsencrypt/pebble/v2/cmd/pebble@v2.10.3 and pass --pebble")
	}
	dir, err := os.MkdirTemp(e.WorkDir, "pebble-")
	if err != nil {
		return nil, err
	}
	t := &target{Label: "pebble (in memory)"}
	var stopProc func()
	t.stop = func() {
		if stopProc != nil {
			stopProc()
		}
		if !e.Keep {
			os.RemoveAll(dir)
		}
	}
	fail := func(err error) (*target, error) { t.stop(); return nil, err }
	certPEM, err := selfSigned(dir)
	if err != nil {
		return fail(err)
	}
	ports, err := freePorts(3)
	if err != nil {
		return fail(err)
	}
	listen := fmt.Sprintf("127.0.0.1:%d", ports[0])
	cfg, _ := json.Marshal(map[string]any{"pebble": map[string]any{
		"listenAddress":                  listen,
		"managementListenAddress":        fmt.Sprintf("127.0.0.1:%d", ports[1]),
		"certificate":                    filepath.Join(dir, "tls.pem"),
		"privateKey":                     filepath.Join(dir, "tls.key"),
		"httpPort":                       e.HTTPPort,
		"tlsPort":                        ports[2],
		"ocspResponderURL":               "",
		"externalAccountBindingRequired": false,
	}})
	cfgPath := filepath.Join(dir, "pebble.json")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		return fail(err)
	}
	env := []string{"PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0", "PEBBLE_AUTHZREUSE=0"}
	pid, stop, err := e.startProcess(dir, "pebble.log", env, e.Pebble, "-config", cfgPath, "-dnsserver", e.Resp.DNSAddr, "-strict=false")
	if err != nil {
		return fail(err)
	}
	stopProc = stop
	t.Procs.pids = map[string][]int{"pebble": {pid}}
	t.Roots = x509.NewCertPool()
	t.Roots.AppendCertsFromPEM(certPEM)
	t.RootPEM = certPEM
	t.Directory = "https://" + listen + "/dir"
	if err := waitDirectory(ctx, t); err != nil {
		return fail(fmt.Errorf("%w (log in %s)", err, dir))
	}
	return t, nil
}

// startProcess starts a server process with its output in logName; stop
// sends SIGTERM and waits (SIGKILL after 15 s).
func (e *benchEnv) startProcess(dir, logName string, env []string, bin string, args ...string) (int, func(), error) {
	logf, err := os.Create(filepath.Join(dir, logName))
	if err != nil {
		return 0, nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return 0, nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logf.Close()
	}
	return cmd.Process.Pid, stop, nil
}

func waitDirectory(ctx context.Context, t *target) error {
	if err := waitOK(ctx, newHTTPClient(t.Roots, 1), t.Directory); err != nil {
		return fmt.Errorf("%s: %w", t.Label, err)
	}
	return nil
}

// selfSigned writes tls.pem and tls.key for Pebble's listener on
// 127.0.0.1 and returns the certificate, which the generator trusts.
func selfSigned(dir string) ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pebble load"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	kd, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(filepath.Join(dir, "tls.pem"), certPEM, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}), 0o600); err != nil {
		return nil, err
	}
	return certPEM, nil
}

// softHSM initialises a SoftHSM2 token in dir and returns the configuration
// that makes a profile signed by a key on it the default (as tests/interop
// does), the `ca init` arguments that create the key, and the environment
// (SoftHSM's configuration and the PIN) for the worker.
func softHSM(dir string) (top, tables string, initArgs, env []string, err error) {
	module := envOr("HALLMARK_PKCS11_MODULE", "/usr/lib/softhsm/libsofthsm2.so")
	if _, err := os.Stat(module); err != nil {
		return "", "", nil, nil, fmt.Errorf("the SoftHSM2 module %s is missing (apt-get install softhsm2): %w", module, err)
	}
	tokens := filepath.Join(dir, "softhsm-tokens")
	if err := os.Mkdir(tokens, 0o700); err != nil {
		return "", "", nil, nil, err
	}
	conf := filepath.Join(dir, "softhsm2.conf")
	if err := os.WriteFile(conf, []byte("directories.tokendir = "+tokens+"\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = false\n"), 0o600); err != nil {
		return "", "", nil, nil, err
	}
	env = []string{"SOFTHSM2_CONF=" + conf, "HALLMARK_LOAD_PIN=123456"}
	cmd := exec.Command("softhsm2-util", "--init-token", "--free", "--label", "hallmark-load", "--pin", "123456", "--so-pin", "654321")
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", nil, nil, fmt.Errorf("softhsm2-util --init-token: %v\n%s", err, out)
	}
	tables = fmt.Sprintf(`
[backends.hsm]
type = "pkcs11"
module = %q
token_label = "hallmark-load"
pin_env = "HALLMARK_LOAD_PIN"
key_label = "hallmark-load-issuer"
cert = "hsm-issuer.pem"

[profiles.hsm]
description = "90-day TLS server certificate, key on a PKCS#11 token"
backend = "pkcs11"
signer = "hsm"
validity_hours = 2160
key_types = ["rsa2048", "p256", "p384"]
challenges = ["http-01"]
identifier_types = ["dns", "ip"]
key_usages = ["digitalSignature", "keyEncipherment"]
ext_key_usages = ["serverAuth"]
`, module)
	return "default_profile = \"hsm\"\n", tables, []string{"--pkcs11", "hsm"}, env, nil
}
