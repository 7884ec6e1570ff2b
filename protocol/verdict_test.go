package protocol_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/hallmark-ca/hallmark/protocol"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/verdict"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/open"
)

// watchedHub is the frontend's Hub, fed by db as cmd/hallmark-frontend
// feeds it; ready closes once it listens (PostgreSQL) or polls (SQLite).
type watchedHub struct {
	*verdict.Hub
	once  sync.Once
	ready chan struct{}
}

func (h *watchedHub) NotifyAll() {
	h.Hub.NotifyAll()
	h.once.Do(func() { close(h.ready) })
}

// watchVerdicts starts db's watch of the verdicts until the test ends,
// and returns once it listens, so no verdict the test records is missed.
func watchVerdicts(t *testing.T, db *open.DB) protocol.Verdicts {
	t.Helper()
	h := &watchedHub{Hub: verdict.New(), ready: make(chan struct{})}
	if db.Dialect != "postgres" {
		close(h.ready) // the poll reads the database: nothing to miss
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = db.WatchVerdicts(ctx, h) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-h.ready:
	case <-time.After(10 * time.Second):
		t.Fatal("the verdict listener did not connect")
	}
	return h
}

// pending is a request sent on its own goroutine.
type pending struct {
	done chan struct{}
	res  *response
	err  error
}

// postAsync signs on the test's goroutine and sends on another.
func (e *env) postAsync(t *testing.T, a *account, url string, payload any) *pending {
	t.Helper()
	var raw []byte
	if payload != nil {
		raw, _ = json.Marshal(payload)
	}
	body := e.sign(t, a, url, raw, signOpts{})
	p := &pending{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/jose+json")
		res, err := e.hc.Do(req)
		if err != nil {
			p.err = err
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		p.res, p.err = &response{status: res.StatusCode, header: res.Header, body: b}, err
	}()
	return p
}

func (p *pending) wait(t *testing.T) *response {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatal("the request did not finish")
	}
	if p.err != nil {
		t.Fatal(p.err)
	}
	return p.res
}

// metric is the value of the frontend's metric line named name (with its
// labels, as /metrics writes them); 0 when absent.
func (e *env) metric(t *testing.T, name string) float64 {
	t.Helper()
	r := e.get(t, http.MethodGet, "/metrics")
	for _, l := range strings.Split(string(r.body), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == name {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			return v
		}
	}
	return 0
}

// waitWaiting waits until n requests wait for a verdict.
func (e *env) waitWaiting(t *testing.T, n float64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := e.metric(t, "hallmark_frontend_verdict_waiting")
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v requests wait for a verdict, want %v", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitVerdicts(ms int) func(*protocol.Config) {
	return func(c *protocol.Config) {
		c.Server.VerdictWaitMS = ms
		c.Server.RequestTimeoutMS = ms + 5000
	}
}

// challengeOf is the order's first authorization's URL and its http-01
// challenge's URL.
func (e *env) challengeOf(t *testing.T, a *account, o orderJSON) (authzURL, challURL string) {
	t.Helper()
	for _, c := range e.authz(t, a, o.Authorizations[0]).Challenges {
		if c.Type == "http-01" {
			return o.Authorizations[0], c.URL
		}
	}
	t.Fatal("no http-01 challenge")
	return "", ""
}

// TestVerdictWaitAnswersTheVerdict: a challenge POST, a read of its
// authorization and a finalize wait, holding no admission permit, for the
// verdict the worker records (here the test, through the store, as a
// worker's would) and answer it, built from a fresh read: valid or
// invalid, with the certificate's URL, and no Retry-After.
func TestVerdictWaitAnswersTheVerdict(t *testing.T) {
	withStores(t, waitVerdicts(30000), func(t *testing.T, e *env) {
		a := e.register(t)
		o, orderURL := e.newOrder(t, a, dnsIDs("wait.example"))
		authzURL, challURL := e.challengeOf(t, a, o)
		post := e.postAsync(t, a, challURL, map[string]any{})
		e.waitWaiting(t, 1) // the challenge processing: its authorization's read waits too
		read := e.postAsync(t, a, authzURL, nil)
		e.waitWaiting(t, 2)
		if n := e.metric(t, "hallmark_frontend_requests_in_flight"); n != 0 {
			t.Errorf("%v admission permits held while two requests wait for a verdict, want 0", n)
		}
		if err := e.st.ChallengeVerdict(context.Background(), store.Verdict{ChallengeID: lastSegment(challURL), Status: acme.StatusValid}); err != nil {
			t.Fatal(err)
		}
		r := post.wait(t)
		wantStatus(t, r, http.StatusOK)
		var c challJSON
		r.json(t, &c)
		if c.Status != acme.StatusValid || r.header.Get("Retry-After") != "" {
			t.Errorf("the challenge POST answered %s with Retry-After %q, want valid without", c.Status, r.header.Get("Retry-After"))
		}
		r = read.wait(t)
		var az authzJSON
		r.json(t, &az)
		if az.Status != acme.StatusValid {
			t.Errorf("the authorization read answered %s, want valid", az.Status)
		}

		leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		fin := e.postAsync(t, a, o.Finalize, map[string]any{"csr": b64(csrFor(t, leafKey, "wait.example"))})
		e.waitWaiting(t, 1)
		_, serial := e.recordIssued(t, a, "", orderURL, leafKey, nil, "wait.example")
		r = fin.wait(t)
		wantStatus(t, r, http.StatusOK)
		var got orderJSON
		r.json(t, &got)
		if got.Status != acme.StatusValid || !strings.HasSuffix(got.Certificate, "/acme/cert/"+serial) || r.header.Get("Retry-After") != "" {
			t.Errorf("the finalize answered %s, certificate %q, Retry-After %q; want valid, the certificate %s, none", got.Status, got.Certificate, r.header.Get("Retry-After"), serial)
		}
		if n := e.metric(t, `hallmark_frontend_verdict_waits_total{outcome="verdict"}`); n != 3 {
			t.Errorf("%v waits ended with the verdict, want 3", n)
		}
	})
}

// TestVerdictWaitFailures: a failed validation and a failed issuance are
// verdicts too: the waiting requests answer invalid, with the error.
func TestVerdictWaitFailures(t *testing.T) {
	withStores(t, waitVerdicts(30000), func(t *testing.T, e *env) {
		a := e.register(t)
		o, _ := e.newOrder(t, a, dnsIDs("fails.example"))
		_, challURL := e.challengeOf(t, a, o)
		post := e.postAsync(t, a, challURL, map[string]any{})
		e.waitWaiting(t, 1)
		p := &acme.Problem{Type: acme.ProblemConnection, Detail: "connection refused"}
		if err := e.st.ChallengeVerdict(context.Background(), store.Verdict{ChallengeID: lastSegment(challURL), Status: acme.StatusInvalid, Error: p}); err != nil {
			t.Fatal(err)
		}
		var c challJSON
		post.wait(t).json(t, &c)
		if c.Status != acme.StatusInvalid || c.Error == nil || c.Error.Type != acme.ProblemConnection {
			t.Errorf("the challenge POST answered %s, error %+v; want invalid, connection", c.Status, c.Error)
		}

		o, orderURL := e.newOrder(t, a, dnsIDs("fails2.example"))
		_, challURL = e.challengeOf(t, a, o)
		post = e.postAsync(t, a, challURL, map[string]any{})
		e.waitWaiting(t, 1)
		if err := e.st.ChallengeVerdict(context.Background(), store.Verdict{ChallengeID: lastSegment(challURL), Status: acme.StatusValid}); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, post.wait(t), http.StatusOK)
		leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		fin := e.postAsync(t, a, o.Finalize, map[string]any{"csr": b64(csrFor(t, leafKey, "fails2.example"))})
		e.waitWaiting(t, 1)
		if err := e.st.OrderFail(context.Background(), lastSegment(orderURL), acme.Problem{Type: acme.ProblemBadCSR, Detail: "lint failed"}); err != nil {
			t.Fatal(err)
		}
		var got orderJSON
		fin.wait(t).json(t, &got)
		if got.Status != acme.StatusInvalid || got.Error == nil || got.Error.Type != acme.ProblemBadCSR {
			t.Errorf("the finalize answered %s, error %+v; want invalid, badCSR", got.Status, got.Error)
		}
	})
}

// TestVerdictWaitTimesOut: with no verdict within verdict_wait_ms (no
// worker runs here, as with a validation target that never answers), a
// challenge POST, a finalize and an order read answer processing with
// Retry-After, as they would without the wait.
func TestVerdictWaitTimesOut(t *testing.T) {
	withStores(t, waitVerdicts(200), func(t *testing.T, e *env) {
		a := e.register(t)
		o, orderURL := e.newOrder(t, a, dnsIDs("slow.example"))
		_, challURL := e.challengeOf(t, a, o)
		r := e.post(t, a, challURL, map[string]any{})
		wantStatus(t, r, http.StatusOK)
		var c challJSON
		r.json(t, &c)
		if c.Status != acme.StatusProcessing || r.header.Get("Retry-After") != "2" {
			t.Errorf("the challenge POST answered %s with Retry-After %q, want processing with 2", c.Status, r.header.Get("Retry-After"))
		}
		if err := e.st.ChallengeVerdict(context.Background(), store.Verdict{ChallengeID: lastSegment(challURL), Status: acme.StatusValid}); err != nil {
			t.Fatal(err)
		}
		leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		for _, step := range []struct {
			what, url string
			payload   any
		}{
			{"finalize", o.Finalize, map[string]any{"csr": b64(csrFor(t, leafKey, "slow.example"))}},
			{"order read", orderURL, nil},
		} {
			r := e.post(t, a, step.url, step.payload)
			wantStatus(t, r, http.StatusOK)
			var got orderJSON
			r.json(t, &got)
			if got.Status != acme.StatusProcessing || r.header.Get("Retry-After") != "2" {
				t.Errorf("the %s answered %s with Retry-After %q, want processing with 2", step.what, got.Status, r.header.Get("Retry-After"))
			}
		}
		if n := e.metric(t, `hallmark_frontend_verdict_waits_total{outcome="timeout"}`); n != 3 {
			t.Errorf("%v waits timed out, want 3", n)
		}
		if n := e.metric(t, "hallmark_frontend_verdict_waiting"); n != 0 {
			t.Errorf("%v requests still counted waiting after their answers", n)
		}
	})
}

// TestVerdictWaitHoldsNoPermit: 500 challenge POSTs waiting for verdicts
// that do not come hold none of the 64 admission permits, so another
// client's requests meanwhile are admitted and answered (before any of
// the waits ends); then the 500 verdicts, recorded at once, wake them all.
func TestVerdictWaitHoldsNoPermit(t *testing.T) {
	const waiting, permits = 500, 64
	withStores(t, func(c *protocol.Config) {
		waitVerdicts(60000)(c)
		c.Server.MaxConcurrentRequests = permits
	}, func(t *testing.T, e *env) {
		a := e.register(t)
		challs := e.challenges(t, a, waiting)
		var wg sync.WaitGroup

		// The 500 POSTs, all sent at once: one the admission refuses (64
		// already in handlers, each for its claim) is sent again.
		answers := make([]*response, waiting)
		for i, u := range challs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[i] = e.postUntilAdmitted(a, u)
			}()
		}
		e.waitWaiting(t, waiting)

		// Another client meanwhile: every request admitted and answered.
		b := e.register(t)
		o, orderURL := e.newOrder(t, b, dnsIDs("other.example"))
		e.authz(t, b, o.Authorizations[0])
		e.getOrder(t, b, orderURL)
		if n := e.metric(t, "hallmark_frontend_verdict_waiting"); n != waiting {
			t.Fatalf("%v requests wait after the other client's requests, want all %d still waiting: the test proves nothing", n, waiting)
		}

		for _, u := range challs {
			if err := e.st.ChallengeVerdict(context.Background(), store.Verdict{ChallengeID: lastSegment(u), Status: acme.StatusValid}); err != nil {
				t.Fatal(err)
			}
		}
		wg.Wait()
		valid := 0
		for i, r := range answers {
			if r == nil {
				t.Fatalf("challenge POST %d failed", i)
			}
			var c challJSON
			if r.status != http.StatusOK || json.Unmarshal(r.body, &c) != nil {
				t.Fatalf("challenge POST %d: %d %s", i, r.status, r.body)
			}
			switch {
			case c.Status == acme.StatusValid:
				valid++
			case c.Status != acme.StatusProcessing || r.header.Get("Retry-After") == "":
				// Woken with every permit taken by the others' re-reads:
				// processing, as after a timeout.
				t.Errorf("challenge POST %d answered %s (Retry-After %q), want valid, or processing with Retry-After", i, c.Status, r.header.Get("Retry-After"))
			}
		}
		t.Logf("%d of %d answered valid; the rest woke with no permit free to read and answered processing", valid, waiting)
		if valid == 0 {
			t.Error("no waiting request answered its verdict")
		}
	})
}

// challenges are the http-01 challenge URLs of n new orders of a, one
// name each.
func (e *env) challenges(t *testing.T, a *account, n int) []string {
	t.Helper()
	challs := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range challs {
		o, _ := e.newOrder(t, a, dnsIDs(fmt.Sprintf("hole%d.example", i)))
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			r, err := e.postQuiet(a, o.Authorizations[0], nil)
			var az authzJSON
			if err != nil || json.Unmarshal(r.body, &az) != nil || len(az.Challenges) == 0 {
				t.Errorf("reading authorization %d: %v", i, err)
				return
			}
			challs[i] = az.Challenges[0].URL
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return challs
}

// postUntilAdmitted POSTs {} to url, again while the admission refuses it
// (503, the server busy), and returns the answer; nil if the request
// failed or was refused for a minute.
func (e *env) postUntilAdmitted(a *account, url string) *response {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		r, err := e.postQuiet(a, url, []byte("{}"))
		if err != nil {
			return nil
		}
		if r.status != http.StatusServiceUnavailable {
			return r
		}
		time.Sleep(time.Duration(10+mrand.IntN(40)) * time.Millisecond)
	}
	return nil
}

// postQuiet is post for a goroutine other than the test's: it reports a
// failure rather than ending the test.
func (e *env) postQuiet(a *account, url string, payload []byte) (*response, error) {
	res, err := e.hc.Head(e.base + "/acme/new-nonce")
	if err != nil {
		return nil, err
	}
	res.Body.Close()
	so := &jose.SignerOptions{ExtraHeaders: map[jose.HeaderKey]any{"nonce": res.Header.Get("Replay-Nonce"), "url": url, "kid": a.kid}}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: a.alg, Key: a.joseKey()}, so)
	if err != nil {
		return nil, err
	}
	sig, err := signer.Sign(payload)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(sig.FullSerialize()), &m); err != nil {
		return nil, err
	}
	if _, ok := m["payload"]; !ok {
		m["payload"] = ""
	}
	body, _ := json.Marshal(m)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/jose+json")
	res, err = e.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return &response{status: res.StatusCode, header: res.Header, body: b}, err
}
