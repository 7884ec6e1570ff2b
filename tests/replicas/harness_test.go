// Package replicas runs several real hallmark-frontend and hallmark-worker
// processes on one PostgreSQL database, with ACME clients sent round-robin
// between the frontends through a reverse proxy in the test, and breaks
// things while they work: a worker killed holding jobs, the database
// restarted, a validation target that never answers, a worker without the
// signing key.
package replicas

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hallmark-ca/hallmark/tests/harness"
	"github.com/hallmark-ca/hallmark/tests/testdns"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }

var (
	requireTool = harness.RequireTool
	freePort    = harness.FreePort
	tail        = harness.Tail
)

// options shape a cluster.
type options struct {
	frontends, workers int
	// worker is extra TOML for the [worker] table of every worker.
	worker string
	// challengeTimeoutMS bounds one validation attempt (default 3000).
	challengeTimeoutMS int
	// server is extra TOML for the [server] table of every frontend.
	server string
	// noKey lists workers (by index) whose ca.dir has no intermediate key.
	noKey map[int]bool
	// startWorkers false leaves the workers to the test to start.
	deferWorkers bool
	// tables is further TOML tables for every process (e.g. [limits]).
	tables string
}

// proc is one frontend or worker process.
type proc struct {
	*harness.Proc
	addr string // frontend: listen address; worker: health address
}

// cluster is N frontends and M workers on one database, behind a
// round-robin reverse proxy that is the clients' one base URL.
type cluster struct {
	t         *testing.T
	dir       string
	dbURL     string
	base      string // the proxy: https://127.0.0.1:port
	root      string // the CA's root certificate (PEM file)
	webroot   string // http-01 answers, written by lego --http.webroot
	httpPort  int
	dns       *testdns.Server
	frontends []*proc
	workers   []*proc
	perFE     []atomic.Int64 // requests the proxy sent to each frontend

	mu        sync.Mutex
	slowHosts map[string]time.Duration // http-01 answers delayed per host
	holes     map[string]bool          // hosts whose http-01 never answers
	holeConns atomic.Int64             // black-holed validations started
	holeOpen  atomic.Int64             // black-holed validations still hanging
	gates     map[string]chan struct{} // hosts whose http-01 answers once the channel closes
	gated     atomic.Int64             // http-01 requests held at a gate so far
	legoExtra []string                 // extra lego flags for every run
	refusals  []refusal                // every answer through the proxy that was not 2xx
}

// refusal is one answer the proxy passed on (or made) that was not 2xx:
// what the clients saw instead of success.
type refusal struct {
	at          time.Time
	method      string
	path        string
	status      int
	retryAfter  string
	contentType string
	body        string
}

func startCluster(t *testing.T, dbURL string, o options) *cluster {
	t.Helper()
	if o.challengeTimeoutMS == 0 {
		o.challengeTimeoutMS = 3000
	}
	dir := t.TempDir()
	c := &cluster{t: t, dir: dir, dbURL: dbURL, dns: testdns.Start(t), webroot: filepath.Join(dir, "webroot"),
		root: filepath.Join(dir, "ca", "root.pem"), slowHosts: map[string]time.Duration{}, holes: map[string]bool{},
		gates: map[string]chan struct{}{}}
	c.perFE = make([]atomic.Int64, o.frontends)
	if err := os.MkdirAll(filepath.Join(c.webroot, ".well-known", "acme-challenge"), 0o755); err != nil {
		t.Fatal(err)
	}
	c.httpPort = c.serveChallenges()
	proxyPort := freePort(t)
	c.base = fmt.Sprintf("https://127.0.0.1:%d", proxyPort)
	pub := freePort(t)

	common := func(listen, publicListen, health, id, caDir string) harness.Config {
		return harness.Config{
			DatabaseURL:        withApplicationName(dbURL, id),
			DatabaseExtra:      "max_conns = 8",
			Listen:             listen,
			PublicHTTPListen:   publicListen,
			ServerExtra:        fmt.Sprintf("base_url = %q\nplain_http = true\n%s", c.base, o.server),
			HealthListen:       health,
			WorkerExtra:        fmt.Sprintf("id = %q\nconcurrency = 8\ncrl_interval_minutes = 60\n%s", id, o.worker),
			Resolver:           c.dns.Addr,
			HTTPPort:           c.httpPort,
			HTTPSPort:          c.httpPort,
			ALPNPort:           freePort(t),
			ChallengeTimeoutMS: o.challengeTimeoutMS,
			CADir:              caDir,
			CAExtra:            fmt.Sprintf("url_base = \"http://127.0.0.1:%d\"", pub),
			Tables:             o.tables,
		}
	}
	newProc := func(name, bin, addr string, cfg harness.Config) *proc {
		path := harness.WriteConfig(t, dir, name, cfg)
		return &proc{Proc: &harness.Proc{Name: name, Dir: dir, Bin: bin, Args: []string{"--config", path}}, addr: addr}
	}
	for i := 0; i < o.frontends; i++ {
		listen := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		publicListen := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		if i == 0 {
			publicListen = fmt.Sprintf("127.0.0.1:%d", pub)
		}
		name := fmt.Sprintf("frontend%d", i+1)
		c.frontends = append(c.frontends, newProc(name, "hallmark-frontend", listen, common(listen, publicListen, "", name, "ca")))
	}
	for i := 0; i < o.workers; i++ {
		health := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		caDir := "ca"
		if o.noKey[i] {
			caDir = "ca-nokey"
		}
		name := fmt.Sprintf("worker%d", i+1)
		c.workers = append(c.workers, newProc(name, "hallmark-worker", health, common(fmt.Sprintf("127.0.0.1:%d", freePort(t)), "", health, name, caDir)))
	}
	cfg0 := c.frontends[0].Args[1]
	c.run("hallmark", "--config", cfg0, "migrate")
	c.run("hallmark-worker", "--config", cfg0, "ca", "init", "--tls-cert", "proxy.pem", "--tls-key", "proxy.key", "--tls-names", "127.0.0.1")
	if len(o.noKey) > 0 {
		// A copy of the CA without the intermediate's key: the key file is
		// unavailable on that worker.
		if err := os.MkdirAll(filepath.Join(dir, "ca-nokey"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"root.pem", "intermediate.pem"} {
			b, err := os.ReadFile(filepath.Join(dir, "ca", f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "ca-nokey", f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(c.stopAll)
	c.startProxy(proxyPort)
	if !o.deferWorkers {
		for i := range c.workers {
			c.start(c.workers[i])
		}
	}
	for _, f := range c.frontends {
		c.start(f)
	}
	c.waitReady()
	return c
}

func (c *cluster) run(bin string, args ...string) string {
	c.t.Helper()
	return harness.Run(c.t, c.dir, nil, bin, args...)
}

// start starts (or restarts) a process; its log appends to <name>.log.
func (c *cluster) start(p *proc) {
	c.t.Helper()
	p.Start(c.t)
}

// kill sends SIGKILL, as a crash would.
func (c *cluster) kill(p *proc) { p.Kill() }

func (c *cluster) stopAll() {
	var all []*harness.Proc
	for _, p := range append(append([]*proc{}, c.frontends...), c.workers...) {
		all = append(all, p.Proc)
	}
	harness.StopAll(c.t, all...)
}

// logOf is a process's log so far.
func (c *cluster) logOf(p *proc) string { return p.Log() }

// startProxy is the load balancer: TLS with a certificate from the CA,
// each request to the next frontend in turn.
func (c *cluster) startProxy(port int) {
	c.t.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(c.dir, "proxy.pem"), filepath.Join(c.dir, "proxy.key"))
	if err != nil {
		c.t.Fatal(err)
	}
	var next atomic.Int64
	targets := make([]*url.URL, len(c.frontends))
	for i, f := range c.frontends {
		targets[i], _ = url.Parse("http://" + f.addr)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			i := int(next.Add(1)-1) % len(targets)
			c.perFE[i].Add(1)
			r.SetURL(targets[i])
			r.Out.Host = r.In.Host
		},
		ErrorLog: nil,
		ModifyResponse: func(res *http.Response) error {
			if res.StatusCode < 300 {
				return nil
			}
			body, err := io.ReadAll(res.Body)
			res.Body.Close()
			res.Body = io.NopCloser(bytes.NewReader(body))
			c.refuse(refusal{at: time.Now(), method: res.Request.Method, path: res.Request.URL.Path, status: res.StatusCode,
				retryAfter: res.Header.Get("Retry-After"), contentType: res.Header.Get("Content-Type"), body: string(body)})
			return err
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			c.refuse(refusal{at: time.Now(), method: r.Method, path: r.URL.Path, status: http.StatusBadGateway, body: err.Error()})
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	ln, err := tls.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		c.t.Fatal(err)
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	c.t.Cleanup(func() { _ = srv.Close() })
}

// serveChallenges answers http-01 from the webroot lego writes, on one
// port for every name (the DNS server answers 127.0.0.1 for all). A slow
// host's answer is delayed; a gated host's held until its gate opens; a
// black-holed host's connection is held open and never answered.
func (c *cluster) serveChallenges() int {
	c.t.Helper()
	files := http.FileServer(http.Dir(c.webroot))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		c.mu.Lock()
		delay, hole, gate := c.slowHosts[host], c.holes[host], c.gates[host]
		c.mu.Unlock()
		if gate != nil {
			c.gated.Add(1)
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		if hole {
			c.holeConns.Add(1)
			c.holeOpen.Add(1)
			defer c.holeOpen.Add(-1)
			<-r.Context().Done()
			return
		}
		if delay > 0 {
			time.Sleep(delay)
		}
		files.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	c.t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

func (c *cluster) refuse(r refusal) {
	c.mu.Lock()
	c.refusals = append(c.refusals, r)
	c.mu.Unlock()
}

// refused is the answers that were not 2xx so far.
func (c *cluster) refused() []refusal {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]refusal(nil), c.refusals...)
}

func (c *cluster) slow(host string, d time.Duration) {
	c.mu.Lock()
	c.slowHosts[host] = d
	c.mu.Unlock()
}

// gate holds host's http-01 answers until the returned function is called.
func (c *cluster) gate(host string) (release func()) {
	ch := make(chan struct{})
	c.mu.Lock()
	c.gates[host] = ch
	c.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

func (c *cluster) blackhole(host string) {
	c.mu.Lock()
	c.holes[host] = true
	c.mu.Unlock()
}

func (c *cluster) waitReady() {
	c.t.Helper()
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for _, f := range c.frontends {
		if !harness.WaitOK(hc, "http://"+f.addr+"/readyz", deadline) {
			c.t.Fatalf("%s at %s did not become ready", f.Name, f.addr)
		}
	}
}

// get fetches a plain-http URL and returns the status and body ("" and 0
// when it cannot connect).
func get(u string) (int, string) {
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get(u)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var signedRE = regexp.MustCompile(`(?m)^hallmark_worker_certificates_signed_total ([0-9.e+]+)$`)

// signed is the worker's count of certificates signed, from its /metrics.
func (c *cluster) signed(w *proc) int {
	c.t.Helper()
	status, body := get("http://" + w.addr + "/metrics")
	if status != 200 {
		c.t.Fatalf("%s /metrics: status %d", w.Name, status)
	}
	m := signedRE.FindStringSubmatch(body)
	if m == nil {
		c.t.Fatalf("%s /metrics has no hallmark_worker_certificates_signed_total", w.Name)
	}
	f, _ := strconv.ParseFloat(m[1], 64)
	return int(f)
}

// lego runs the lego binary once for name through the proxy, answering
// http-01 through the webroot.
func (c *cluster) lego(ctx context.Context, path, name string, extra ...string) (string, error) {
	args := []string{"--domains", name, "--http", "--http.webroot", c.webroot}
	args = append(append(args, c.legoExtra...), extra...)
	args = append(args, "run", "--no-bundle")
	return c.legoRun(ctx, path, args...)
}

// legoRun runs lego with path as its account directory against the proxy.
func (c *cluster) legoRun(ctx context.Context, path string, args ...string) (string, error) {
	l := harness.Lego{Bin: "lego", Directory: c.base + "/directory", Root: c.root, Email: "replicas@hallmark.test", Path: path}
	return l.Run(ctx, args...)
}

// legoUntil runs lego for name until it gets a certificate, at most tries
// times (a run that met an outage fails; its retry must succeed).
func (c *cluster) legoUntil(ctx context.Context, path, name string, tries int) (int, string, error) {
	var out string
	var err error
	for i := 1; i <= tries; i++ {
		out, err = c.lego(ctx, path, name)
		if err == nil {
			return i, out, nil
		}
		if ctx.Err() != nil {
			break
		}
		time.Sleep(time.Second)
	}
	return tries, out, err
}

// db opens a connection to the cluster's database for the checks.
func (c *cluster) db(ctx context.Context) *pgx.Conn {
	c.t.Helper()
	conn, err := pgx.Connect(ctx, c.dbURL)
	if err != nil {
		c.t.Fatalf("connecting to the database: %v", err)
	}
	c.t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func queryInt(t *testing.T, ctx context.Context, conn *pgx.Conn, q string, args ...any) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(ctx, q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// checkBooks asserts nothing was lost or duplicated: no order left
// processing, one certificate per valid order and none without one, each
// CRL number once per issuer's CRL shard, and the workers' signing counters add up to
// the certificates stored. It returns the number of certificates.
func (c *cluster) checkBooks(ctx context.Context, workers ...*proc) int {
	t := c.t
	t.Helper()
	conn := c.db(ctx)
	if n := queryInt(t, ctx, conn, `SELECT count(*) FROM orders WHERE status = 'processing'`); n != 0 {
		t.Errorf("%d orders stranded in processing", n)
	}
	if n := queryInt(t, ctx, conn, `SELECT count(*) FROM challenges WHERE status = 'processing'`); n != 0 {
		t.Errorf("%d challenges stranded in processing", n)
	}
	if n := queryInt(t, ctx, conn, `SELECT count(*) FROM (SELECT order_id FROM certificates GROUP BY order_id HAVING count(*) > 1) d`); n != 0 {
		t.Errorf("%d orders have more than one certificate", n)
	}
	if n := queryInt(t, ctx, conn, `SELECT count(*) FROM orders o WHERE o.status = 'valid' AND NOT EXISTS (SELECT 1 FROM certificates c WHERE c.order_id = o.id)`); n != 0 {
		t.Errorf("%d valid orders without a certificate", n)
	}
	if n := queryInt(t, ctx, conn, `SELECT count(*) FROM certificates c WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.id = c.order_id AND o.status = 'valid' AND o.cert_serial = c.serial)`); n != 0 {
		t.Errorf("%d certificates without a valid order naming them", n)
	}
	if n := queryInt(t, ctx, conn, `SELECT count(*) FROM (SELECT issuer_id, shard, number FROM crls GROUP BY issuer_id, shard, number HAVING count(*) > 1) d`); n != 0 {
		t.Errorf("%d CRL numbers used twice", n)
	}
	certs := queryInt(t, ctx, conn, `SELECT count(*) FROM certificates`)
	if len(workers) > 0 {
		total := 0
		for _, w := range workers {
			total += c.signed(w)
		}
		if total != certs {
			t.Errorf("the workers signed %d certificates, the database holds %d: a signing was lost or duplicated", total, certs)
		}
	}
	return certs
}

// withApplicationName names a process's PostgreSQL sessions after it
// (application_name, shown in pg_stat_activity), so a test can tell what a
// stopped worker's sessions are still executing (heldSettled).
func withApplicationName(dbURL, name string) string {
	if !strings.HasPrefix(dbURL, "postgres") {
		return dbURL
	}
	sep := "?"
	if strings.Contains(dbURL, "?") {
		sep = "&"
	}
	return dbURL + sep + "application_name=" + url.QueryEscape(name)
}
