package replicas

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/acme"

	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// pinnedTransport sends every request to one frontend, whatever host the
// URL names (the proxy's: the frontends' base_url), and keeps each
// finalize's answer for the test.
type pinnedTransport struct {
	addr string

	mu        sync.Mutex
	finalized []*recorded
}

// recorded is one answer, read whole.
type recorded struct {
	status     int
	retryAfter string
	body       []byte
}

func (p *pinnedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	out := r.Clone(r.Context())
	out.URL.Scheme, out.URL.Host, out.Host = "http", p.addr, ""
	res, err := http.DefaultTransport.RoundTrip(out)
	if err != nil || !strings.HasSuffix(r.URL.Path, "/finalize") {
		return res, err
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	res.Body = io.NopCloser(bytes.NewReader(body))
	p.mu.Lock()
	p.finalized = append(p.finalized, &recorded{status: res.StatusCode, retryAfter: res.Header.Get("Retry-After"), body: body})
	p.mu.Unlock()
	return res, err
}

// pinned is cl's account on a client whose requests all go to frontend f.
func (c *cluster) pinned(ctx context.Context, cl *acme.Client, f *proc) (*acme.Client, *pinnedTransport, error) {
	kid, err := cl.GetReg(ctx, "")
	if err != nil {
		return nil, nil, err
	}
	tr := &pinnedTransport{addr: f.addr}
	return &acme.Client{Key: cl.Key, KID: acme.KeyID(kid.URI), DirectoryURL: cl.DirectoryURL,
		HTTPClient: &http.Client{Timeout: 30 * time.Second, Transport: tr}, RetryBackoff: honourRetryAfter}, tr, nil
}

// waitMetric waits until frontend f's metric reads want.
func (c *cluster) waitMetric(t *testing.T, f *proc, name string, want float64) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, m := get("http://" + f.addr + "/metrics")
		v, err := strconv.ParseFloat(metricValue(m, name), 64)
		if err == nil && v == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s of %s: %q, want %v", name, f.Name, metricValue(m, name), want)
		}
	}
}

// TestVerdictWakesAnotherFrontend: two frontends and a worker on one
// PostgreSQL. A challenge POST on frontend 1 and a read of the same
// challenge on frontend 2 both wait (verdict_wait_ms) while the worker's
// validation is held at the target; once it is let through, the worker's
// verdict wakes both, and both answer valid. A finalize on frontend 2 is
// answered with the certificate the worker issued: valid, with its URL,
// from a fresh read.
func TestVerdictWakesAnotherFrontend(t *testing.T) {
	c := startCluster(t, testdb.Postgres(t), options{frontends: 2, workers: 1,
		server: "verdict_wait_ms = 8000", challengeTimeoutMS: 20000})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	fe1, fe2 := c.frontends[0], c.frontends[1]

	cl, err := c.acmeClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const name = "gate.replicas.test"
	release := c.gate(name)
	defer release()
	o, ch := c.answeredChallenge(t, ctx, cl, name)
	on1, _, err := c.pinned(ctx, cl, fe1)
	if err != nil {
		t.Fatal(err)
	}
	on2, tr2, err := c.pinned(ctx, cl, fe2)
	if err != nil {
		t.Fatal(err)
	}

	type result struct {
		ch  *acme.Challenge
		err error
	}
	posted, read := make(chan result, 1), make(chan result, 1)
	go func() { x, err := on1.Accept(ctx, ch); posted <- result{x, err} }()
	// The claim committed and the worker's validation is held at the gate.
	for deadline := time.Now().Add(30 * time.Second); c.gated.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the worker's validation never reached the target")
		}
	}
	go func() { x, err := on2.GetChallenge(ctx, ch.URI); read <- result{x, err} }()
	c.waitMetric(t, fe1, "hallmark_frontend_verdict_waiting", 1)
	c.waitMetric(t, fe2, "hallmark_frontend_verdict_waiting", 1)
	release()
	for what, res := range map[string]chan result{"the challenge POST on frontend 1": posted, "the challenge read on frontend 2": read} {
		r := <-res
		if r.err != nil {
			t.Fatalf("%s: %v", what, r.err)
		}
		if r.ch.Status != acme.StatusValid {
			t.Errorf("%s answered %s, want valid: the worker's verdict did not wake it", what, r.ch.Status)
		}
	}

	finalizedValid(t, ctx, on2, tr2, o, name)
}

// answeredChallenge orders name for cl and answers its http-01 challenge
// through the cluster's webroot, without telling the CA yet.
func (c *cluster) answeredChallenge(t *testing.T, ctx context.Context, cl *acme.Client, name string) (*acme.Order, *acme.Challenge) {
	t.Helper()
	o, err := cl.AuthorizeOrder(ctx, acme.DomainIDs(name))
	if err != nil {
		t.Fatal(err)
	}
	z, err := cl.GetAuthorization(ctx, o.AuthzURLs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range z.Challenges {
		if ch.Type != "http-01" {
			continue
		}
		answer, err := cl.HTTP01ChallengeResponse(ch.Token)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(c.webroot, ".well-known", "acme-challenge", ch.Token), []byte(answer), 0o644); err != nil {
			t.Fatal(err)
		}
		return o, ch
	}
	t.Fatal("no http-01 challenge offered")
	return nil, nil
}

// finalizedValid finalizes o through cl, whose requests tr records, and
// checks that the finalize itself answered the issued certificate.
func finalizedValid(t *testing.T, ctx context.Context, cl *acme.Client, tr *pinnedTransport, o *acme.Order, name string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{DNSNames: []string{name}}, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := cl.CreateOrderCert(ctx, o.FinalizeURL, csr, true); err != nil {
		t.Fatalf("finalizing on frontend 2: %v", err)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.finalized) != 1 {
		t.Fatalf("%d finalize requests, want 1", len(tr.finalized))
	}
	f := tr.finalized[0]
	var got struct {
		Status      string `json:"status"`
		Certificate string `json:"certificate"`
	}
	if err := json.Unmarshal(f.body, &got); err != nil {
		t.Fatalf("the finalize answer: %v: %s", err, f.body)
	}
	if f.status != http.StatusOK || got.Status != "valid" || got.Certificate == "" || f.retryAfter != "" {
		t.Errorf("the finalize on frontend 2 answered %d %s, certificate %q, Retry-After %q; want 200 valid with the certificate's URL and no Retry-After",
			f.status, got.Status, got.Certificate, f.retryAfter)
	}
}
