package replicas

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/crypto/acme"
)

// standbyPG is a streaming standby of a private cluster: its port, and
// pg_ctl promote.
type standbyPG struct {
	port    int
	promote func()
}

// newSynchronousStandby makes a standby of the private cluster at
// primaryURL (pg_basebackup on loopback), starts it on a free port, and
// makes it the primary's synchronous standby: a commit returns only once
// the standby has it.
func newSynchronousStandby(t *testing.T, primaryURL string) standbyPG {
	t.Helper()
	u, err := url.Parse(primaryURL)
	if err != nil {
		t.Fatal(err)
	}
	primaryPort := u.Port()
	bin := os.Getenv("HALLMARK_PG_BIN")
	if bin == "" {
		matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
		if len(matches) > 0 {
			bin = filepath.Dir(matches[len(matches)-1])
		}
	}
	dir, err := os.MkdirTemp("", "hallmark-standby-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		pu, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root and there is no postgres user to run PostgreSQL as: %v", err)
		}
		uid, _ := strconv.Atoi(pu.Uid)
		gid, _ := strconv.Atoi(pu.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	command := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Dir = dir
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		return cmd
	}
	pg := func(name string, args ...string) {
		t.Helper()
		if out, err := command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	data := filepath.Join(dir, "data")
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%s user=postgres application_name=standby1", primaryPort)
	pg("pg_basebackup", "-d", conninfo, "-D", data, "-R", "-X", "stream", "--no-sync")
	port := freePort(t)
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100", port, dir)
	pg("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "pg.log"), "-w", "-t", "30", "start")
	t.Cleanup(func() { _ = command("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop").Run() })

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, primaryURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{`ALTER SYSTEM SET synchronous_standby_names = 'standby1'`, `SELECT pg_reload_conf()`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for {
		var state string
		err := conn.QueryRow(ctx, `SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby1'`).Scan(&state)
		if err == nil && state == "sync" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the standby is not the primary's synchronous standby within 30s (state %q, %v)", state, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return standbyPG{port: port, promote: func() { pg("pg_ctl", "-D", data, "-w", "-t", "30", "promote") }}
}

// seenValid is an order a client saw valid, and the certificate it got.
type seenValid struct {
	order  string // the order's URL
	serial string // the certificate's serial, lower-case hex
}

// recordingLoad is startLoad's load keeping what each client saw valid.
type recordingLoad struct {
	*load
	seenMu sync.Mutex
	seen   []seenValid
}

// startRecordingLoad starts n clients issuing one name after another, as
// startLoad does, each recording every order it saw valid with its
// certificate's serial.
func (c *cluster) startRecordingLoad(ctx context.Context, n int) *recordingLoad {
	l := &recordingLoad{load: &load{stop: make(chan struct{})}}
	ready := make(chan error, n)
	for i := 0; i < n; i++ {
		l.wg.Add(1)
		go func(i int) {
			defer l.wg.Done()
			cl, err := c.acmeClient(ctx)
			ready <- err
			if err != nil {
				return
			}
			for k := 0; ; k++ {
				select {
				case <-l.stop:
					return
				default:
				}
				name := fmt.Sprintf("c%d-i%d.failover.test", i, k)
				l.started.Add(1)
				sv, err := c.issueSeen(ctx, cl, name)
				if err != nil {
					l.mu.Lock()
					l.failures = append(l.failures, fmt.Sprintf("%s: %v", name, err))
					l.mu.Unlock()
					return
				}
				l.seenMu.Lock()
				l.seen = append(l.seen, sv)
				l.seenMu.Unlock()
				l.done.Add(1)
			}
		}(i)
	}
	for i := 0; i < n; i++ {
		if err := <-ready; err != nil {
			c.t.Fatalf("a client could not register before the failover: %v", err)
		}
	}
	return l
}

// issueSeen is issueACME, answering what the client saw: the order's URL
// once valid, and its certificate's serial.
func (c *cluster) issueSeen(ctx context.Context, cl *acme.Client, name string) (seenValid, error) {
	o, err := cl.AuthorizeOrder(ctx, acme.DomainIDs(name))
	if err != nil {
		return seenValid{}, fmt.Errorf("newOrder: %w", err)
	}
	for _, u := range o.AuthzURLs {
		z, err := cl.GetAuthorization(ctx, u)
		if err != nil {
			return seenValid{}, fmt.Errorf("reading the authorization: %w", err)
		}
		if z.Status == acme.StatusValid {
			continue
		}
		var ch *acme.Challenge
		for _, x := range z.Challenges {
			if x.Type == "http-01" {
				ch = x
			}
		}
		if ch == nil {
			return seenValid{}, errors.New("no http-01 challenge offered")
		}
		answer, err := cl.HTTP01ChallengeResponse(ch.Token)
		if err != nil {
			return seenValid{}, err
		}
		if err := os.WriteFile(filepath.Join(c.webroot, ".well-known", "acme-challenge", ch.Token), []byte(answer), 0o644); err != nil {
			return seenValid{}, err
		}
		if _, err := cl.Accept(ctx, ch); err != nil {
			return seenValid{}, fmt.Errorf("answering the challenge: %w", err)
		}
		if _, err := cl.WaitAuthorization(ctx, u); err != nil {
			return seenValid{}, fmt.Errorf("waiting for the authorization: %w", err)
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return seenValid{}, err
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{DNSNames: []string{name}}, key)
	if err != nil {
		return seenValid{}, err
	}
	ders, _, err := cl.CreateOrderCert(ctx, o.FinalizeURL, csr, true)
	if err != nil {
		return seenValid{}, fmt.Errorf("finalizing: %w", err)
	}
	leaf, err := x509.ParseCertificate(ders[0])
	if err != nil {
		return seenValid{}, fmt.Errorf("the certificate does not parse: %w", err)
	}
	return seenValid{order: o.URI, serial: fmt.Sprintf("%x", leaf.SerialNumber)}, leaf.VerifyHostname(name)
}

// TestStandbyFailover: two frontends and two workers on a primary with a
// synchronous standby, database.url naming both hosts with
// target_session_attrs=read-write. Clients issue without pause; the
// standby is promoted and the old primary stopped. Hallmark goes on without
// a restart: the same processes issue on the new primary, every answer
// that was not a success is 503 with Retry-After (or badNonce, once per
// client: nonces are not replicated), every order a client saw
// valid is valid on the new primary with the very certificate the client
// got, and no order or challenge is left processing. Afterwards a verdict
// wakes the requests waiting for it on both frontends: their listeners
// are on the new primary.
func TestStandbyFailover(t *testing.T) {
	requireTool(t, "pg_basebackup", "apt-get install postgresql")
	primary := newPrivatePostgres(t)
	standby := newSynchronousStandby(t, primary.url)
	u, _ := url.Parse(primary.url)
	both := fmt.Sprintf("postgres://postgres@%s,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write", u.Host, standby.port)
	c := startCluster(t, both, options{frontends: 2, workers: 2, worker: "job_timeout_ms = 5000\nrescue_after_ms = 8000",
		server: "verdict_wait_ms = 8000", challengeTimeoutMS: 4500})
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	pids := map[string]int{}
	for _, p := range append(append([]*proc{}, c.frontends...), c.workers...) {
		pids[p.Name] = p.Cmd.Process.Pid
	}
	l := c.startRecordingLoad(ctx, 8)
	waitIssued := func(n int64) {
		t.Helper()
		for deadline := time.Now().Add(90 * time.Second); l.done.Load() < n; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("only %d certificates issued of the %d awaited", l.done.Load(), n)
			}
		}
	}
	waitIssued(12)

	before := l.done.Load()
	start := time.Now()
	standby.promote()
	primary.stop()
	t.Logf("promoted the standby and stopped the old primary in %s, after %d certificates", time.Since(start).Round(time.Millisecond), before)
	waitIssued(before + 12)
	l.finish()

	for _, p := range append(append([]*proc{}, c.frontends...), c.workers...) {
		if p.Cmd == nil || p.Cmd.ProcessState != nil || p.Cmd.Process.Pid != pids[p.Name] || p.Cmd.Process.Signal(syscall.Signal(0)) != nil {
			t.Errorf("%s is not the process started before the failover", p.Name)
		}
	}
	refusals := c.refused()
	byStatus, bad := map[string]int{}, 0
	for _, r := range refusals {
		byStatus[fmt.Sprintf("%d %s", r.status, problemType(r.body))]++
		if r.status == http.StatusServiceUnavailable && r.retryAfter != "" && r.contentType == "application/problem+json" {
			continue
		}
		// The nonce tables are unlogged, so not replicated: the new primary
		// starts a nonce epoch, and a nonce handed out before the failover
		// is refused once, with a fresh one to retry with (RFC 8555 §6.5).
		if r.status == http.StatusBadRequest && problemType(r.body) == "urn:ietf:params:acme:error:badNonce" {
			continue
		}
		if bad++; bad <= 10 {
			t.Errorf("%s %s answered %d, Retry-After %q: %s; want 503 with Retry-After", r.method, r.path, r.status, r.retryAfter, tail(r.body, 300))
		}
	}
	t.Logf("%d issuances started, %d certificates; refusals by status and type: %v", l.started.Load(), l.done.Load(), byStatus)
	if len(l.failures) > 0 {
		t.Errorf("%d of %d issuances lost; first: %s", len(l.failures), l.started.Load(), strings.Join(l.failures[:min(3, len(l.failures))], "\n"))
	}

	// Every order a client saw valid is on the new primary, valid, with
	// the certificate the client got.
	conn := c.db(ctx)
	var inRecovery bool
	if err := conn.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&inRecovery); err != nil || inRecovery {
		t.Fatalf("the checks' connection is not on the new primary: in recovery %v, %v", inRecovery, err)
	}
	l.seenMu.Lock()
	seen := append([]seenValid(nil), l.seen...)
	l.seenMu.Unlock()
	missing := 0
	for _, sv := range seen {
		id := sv.order[strings.LastIndex(sv.order, "/")+1:]
		var status, serial string
		err := conn.QueryRow(ctx, `SELECT o.status, coalesce(o.cert_serial, '') FROM orders o
JOIN certificates c ON c.order_id = o.id AND c.serial = o.cert_serial WHERE o.id = $1`, id).Scan(&status, &serial)
		if err != nil || status != "valid" || !strings.EqualFold(strings.TrimLeft(serial, "0"), strings.TrimLeft(sv.serial, "0")) {
			if missing++; missing <= 5 {
				t.Errorf("order %s, seen valid with certificate %s, is on the new primary as %q with %q (%v)", id, sv.serial, status, serial, err)
			}
		}
	}
	t.Logf("%d orders seen valid, %d of them not on the new primary as seen", len(seen), missing)
	certs := c.checkBooks(ctx)
	if certs < len(seen) {
		t.Errorf("%d certificates on the new primary, the clients got %d", certs, len(seen))
	}
	signed := 0
	for _, w := range c.workers {
		signed += c.signed(w)
	}
	t.Logf("the workers signed %d certificates; the new primary holds %d", signed, certs)
	verdictsWakeAfterFailover(t, ctx, c)
}

// verdictsWakeAfterFailover: each frontend's verdict listener is on the
// new primary: a challenge POST on frontend 1 and a read of it on frontend
// 2, both waiting for the worker's verdict, are woken by it and answer
// valid, well inside the 8 s wait.
func verdictsWakeAfterFailover(t *testing.T, ctx context.Context, c *cluster) {
	t.Helper()
	cl, err := c.acmeClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const name = "after.failover.test"
	release := c.gate(name)
	defer release()
	_, ch := c.answeredChallenge(t, ctx, cl, name)
	on1, _, err := c.pinned(ctx, cl, c.frontends[0])
	if err != nil {
		t.Fatal(err)
	}
	on2, _, err := c.pinned(ctx, cl, c.frontends[1])
	if err != nil {
		t.Fatal(err)
	}
	posted, read := make(chan *acme.Challenge, 1), make(chan *acme.Challenge, 1)
	go func() { x, _ := on1.Accept(ctx, ch); posted <- x }()
	for deadline := time.Now().Add(30 * time.Second); c.gated.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the worker's validation never reached the target")
		}
	}
	go func() { x, _ := on2.GetChallenge(ctx, ch.URI); read <- x }()
	c.waitMetric(t, c.frontends[0], "hallmark_frontend_verdict_waiting", 1)
	c.waitMetric(t, c.frontends[1], "hallmark_frontend_verdict_waiting", 1)
	start := time.Now()
	release()
	for what, res := range map[string]chan *acme.Challenge{"the challenge POST on frontend 1": posted, "the challenge read on frontend 2": read} {
		if x := <-res; x == nil || x.Status != acme.StatusValid {
			t.Errorf("%s after the failover answered %+v, want valid: the verdict did not wake it", what, x)
		}
	}
	t.Logf("both waits woken %s after the verdict was let through", time.Since(start).Round(time.Millisecond))
}
