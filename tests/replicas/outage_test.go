package replicas

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/acme"
)

// honourRetryAfter is a client's retry policy that does what the server
// says and nothing more: it waits as long as Retry-After asks and retries;
// a badNonce (400, the one refusal x/crypto/acme retries) is retried at
// once, as RFC 8555 §6.5 asks; any other failure without Retry-After ends
// the issuance.
func honourRetryAfter(_ int, _ *http.Request, res *http.Response) time.Duration {
	if secs, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && secs > 0 {
		return time.Duration(secs) * time.Second
	}
	if res.StatusCode == http.StatusBadRequest {
		return 10 * time.Millisecond
	}
	return 0
}

// acmeClient is a golang.org/x/crypto/acme client with an account of its
// own, talking to the cluster's proxy.
func (c *cluster) acmeClient(ctx context.Context) (*acme.Client, error) {
	pem, err := os.ReadFile(c.root)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	cl := &acme.Client{
		Key:          key,
		DirectoryURL: c.base + "/directory",
		HTTPClient:   &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}},
		RetryBackoff: honourRetryAfter,
	}
	if _, err := cl.Register(ctx, &acme.Account{}, acme.AcceptTOS); err != nil {
		return nil, fmt.Errorf("registering: %w", err)
	}
	return cl, nil
}

// issueACME takes name from newOrder to its certificate, answering http-01
// through the cluster's webroot.
func (c *cluster) issueACME(ctx context.Context, cl *acme.Client, name string) error {
	o, err := cl.AuthorizeOrder(ctx, acme.DomainIDs(name))
	if err != nil {
		return fmt.Errorf("newOrder: %w", err)
	}
	for _, u := range o.AuthzURLs {
		z, err := cl.GetAuthorization(ctx, u)
		if err != nil {
			return fmt.Errorf("reading the authorization: %w", err)
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
			return errors.New("no http-01 challenge offered")
		}
		answer, err := cl.HTTP01ChallengeResponse(ch.Token)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(c.webroot, ".well-known", "acme-challenge", ch.Token), []byte(answer), 0o644); err != nil {
			return err
		}
		if _, err := cl.Accept(ctx, ch); err != nil {
			return fmt.Errorf("answering the challenge: %w", err)
		}
		if _, err := cl.WaitAuthorization(ctx, u); err != nil {
			return fmt.Errorf("waiting for the authorization: %w", err)
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{DNSNames: []string{name}}, key)
	if err != nil {
		return err
	}
	ders, _, err := cl.CreateOrderCert(ctx, o.FinalizeURL, csr, true)
	if err != nil {
		return fmt.Errorf("finalizing: %w", err)
	}
	leaf, err := x509.ParseCertificate(ders[0])
	if err != nil {
		return fmt.Errorf("the certificate does not parse: %w", err)
	}
	if err := leaf.VerifyHostname(name); err != nil {
		return err
	}
	return nil
}

// load is clients issuing one certificate after another until stopped.
type load struct {
	started, done atomic.Int64
	mu            sync.Mutex
	failures      []string
	stop          chan struct{}
	wg            sync.WaitGroup
}

// startLoad starts n clients, each registering an account and then
// issuing for a new name at a time until the load is stopped or an
// issuance fails; an issuance started is always finished (or failed),
// never abandoned.
func (c *cluster) startLoad(ctx context.Context, n int) *load {
	l := &load{stop: make(chan struct{})}
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
				name := fmt.Sprintf("c%d-i%d.outage.test", i, k)
				l.started.Add(1)
				if err := c.issueACME(ctx, cl, name); err != nil {
					// The client gives up, as a real one would.
					l.mu.Lock()
					l.failures = append(l.failures, fmt.Sprintf("%s: %v", name, err))
					l.mu.Unlock()
					return
				}
				l.done.Add(1)
			}
		}(i)
	}
	for i := 0; i < n; i++ {
		if err := <-ready; err != nil {
			c.t.Fatalf("a client could not register before any outage: %v", err)
		}
	}
	return l
}

// finish stops starting issuances and waits for those started.
func (l *load) finish() {
	close(l.stop)
	l.wg.Wait()
}

// problemType is the "type" of a problem document, "" if body is none.
func problemType(body string) string {
	var p struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal([]byte(body), &p)
	return p.Type
}

// TestPostgresOutageUnderLoad: clients issue certificates without pause
// through two frontends and a worker while PostgreSQL is restarted
// (pg_ctl restart) and then stopped for five seconds and started. Every
// answer they get that is not a success is 503 serverInternal with
// Retry-After; clients that wait as Retry-After says and retry lose no
// issuance: each one started ends with its certificate, and the books
// balance. /readyz of each frontend is 503 while the database is stopped
// and 200 once it is back. The stop outlasts the worker's heartbeat
// (2 s), which it renews once the database is back: no job is taken from
// it, so no order is signed twice.
func TestPostgresOutageUnderLoad(t *testing.T) {
	pg := newPrivatePostgres(t)
	c := startCluster(t, pg.url, options{frontends: 2, workers: 1, worker: "job_timeout_ms = 5000\nrescue_after_ms = 8000\nheartbeat_ms = 2000"})
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	l := c.startLoad(ctx, 16)
	waitIssued := func(n int64) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); l.done.Load() < n; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("only %d certificates issued of the %d awaited", l.done.Load(), n)
			}
		}
	}
	waitIssued(16)

	before := l.done.Load()
	start := time.Now()
	pg.restart()
	restarted := time.Since(start)
	waitIssued(before + 16)
	restartRefusals := len(c.refused())

	before = l.done.Load()
	pg.stop()
	down := time.Now()
	time.Sleep(time.Second)
	for _, f := range c.frontends {
		if status, body := get("http://" + f.addr + "/readyz"); status != http.StatusServiceUnavailable {
			t.Errorf("%s /readyz with the database stopped: %d %q, want 503", f.Name, status, body)
		}
	}
	time.Sleep(4 * time.Second)
	pg.start()
	stopped := time.Since(down)
	for _, f := range c.frontends {
		if !harnessWaitOK("http://"+f.addr+"/readyz", 10*time.Second) {
			t.Errorf("%s /readyz is not 200 within 10s of the database's start", f.Name)
		}
	}
	waitIssued(before + 16)
	l.finish()

	refusals := c.refused()
	t.Logf("restart took %s, stop lasted %s; %d issuances started, %d certificates; %d refusals (%d around the restart)",
		restarted.Round(time.Millisecond), stopped.Round(time.Millisecond), l.started.Load(), l.done.Load(), len(refusals), restartRefusals)
	if restartRefusals == 0 || len(refusals) == restartRefusals {
		t.Errorf("the clients met %d refusals around the restart and %d around the stop: an outage the clients never saw proves nothing",
			restartRefusals, len(refusals)-restartRefusals)
	}
	byStatus, bad := map[string]int{}, 0
	for _, r := range refusals {
		byStatus[fmt.Sprintf("%d %s", r.status, problemType(r.body))]++
		if r.status == http.StatusServiceUnavailable && problemType(r.body) == "urn:ietf:params:acme:error:serverInternal" &&
			r.contentType == "application/problem+json" && r.retryAfter != "" {
			continue
		}
		if bad++; bad <= 10 {
			t.Errorf("%s %s answered %d, Retry-After %q, Content-Type %q: %s; want 503 serverInternal with Retry-After",
				r.method, r.path, r.status, r.retryAfter, r.contentType, tail(r.body, 300))
		}
	}
	if bad > 10 {
		t.Errorf("... %d such answers in all", bad)
	}
	t.Logf("refusals by status and type: %v", byStatus)
	if len(l.failures) > 0 {
		t.Errorf("%d of %d issuances lost; first: %s", len(l.failures), l.started.Load(), strings.Join(l.failures[:min(3, len(l.failures))], "\n"))
	}
	certs := c.checkBooks(ctx, c.workers...)
	if int64(certs) != l.done.Load() {
		t.Errorf("%d certificates stored, the clients got %d", certs, l.done.Load())
	}
}

// harnessWaitOK polls u until it answers 200 or within runs out.
func harnessWaitOK(u string, within time.Duration) bool {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if status, _ := get(u); status == http.StatusOK {
			return true
		}
	}
	return false
}
