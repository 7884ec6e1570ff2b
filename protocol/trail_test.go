package protocol_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hallmark-ca/hallmark/protocol"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/origin"
	"github.com/hallmark-ca/hallmark/store"
)

// clientFrom is a client whose connections come from the loopback address
// local (127.0.0.2: another peer than the tests' 127.0.0.1) and whose
// requests carry user agent ua and, when set, X-Request-Id id.
func clientFrom(local, ua, id string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	return &http.Client{Transport: headerTransport{&http.Transport{DialContext: d.DialContext}, ua, id}}
}

type headerTransport struct {
	base   http.RoundTripper
	ua, id string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("User-Agent", h.ua)
	if h.id != "" {
		r.Header.Set("X-Request-Id", h.id)
	}
	return h.base.RoundTrip(r)
}

// TestRequestID: every answer names its request; a proxy's id is kept
// only from a trusted peer and only when well-formed.
func TestRequestID(t *testing.T) {
	t.Parallel()
	trust := func(c *protocol.Config) { c.Server.RequestIDTrustedProxies = []string{"127.0.0.2/32"} }
	withStores(t, trust, func(t *testing.T, e *env) {
		seen := map[string]bool{}
		for _, tc := range []struct {
			name, from, sent string
			kept             bool
		}{
			{"no id sent", "127.0.0.1", "", false},
			{"untrusted peer", "127.0.0.1", "proxy-id-1", false},
			{"trusted peer", "127.0.0.2", "proxy-id-2", true},
			{"trusted peer, malformed", "127.0.0.2", "a/b;c", false},
			{"trusted peer, too long", "127.0.0.2", strings.Repeat("x", origin.MaxIDLength+1), false},
		} {
			e.hc = clientFrom(tc.from, "test/1", tc.sent)
			for _, path := range []string{"/directory", "/acme/new-nonce", "/no-such-resource", "/healthz"} {
				r := e.get(t, http.MethodGet, path)
				got := r.header.Get("X-Request-Id")
				switch {
				case tc.kept && got != tc.sent:
					t.Errorf("%s, %s: X-Request-Id %q, want the proxy's %q", tc.name, path, got, tc.sent)
				case !tc.kept && (got == tc.sent || !origin.ValidID(got) || seen[got]):
					t.Errorf("%s, %s: X-Request-Id %q, want a fresh id of the frontend's", tc.name, path, got)
				}
				seen[got] = true
			}
		}
	})
}

// failingAudit fails every trail record once fail is set.
type failingAudit struct {
	store.Store
	fail *atomic.Bool
}

func (f failingAudit) AuditRecord(ctx context.Context, ev store.AuditEvent) error {
	if f.fail.Load() {
		return errors.New("audit table on fire")
	}
	return f.Store.AuditRecord(ctx, ev)
}

// TestRefusalsOnTheTrail: a new account, a newOrder the policy refuses and
// a finalize with a CSR for other names each leave one trail event with
// the request's id, the client's address and its user agent; a refusal
// whose record fails is still answered, and logged with its request id.
func TestRefusalsOnTheTrail(t *testing.T) {
	t.Parallel()
	fail := &atomic.Bool{}
	var logs syncBuffer
	wrap := func(s store.Store) store.Store { return failingAudit{s, fail} }
	withWrappedStores(t, nil, wrap, &logs, func(t *testing.T, e *env) {
		e.hc = clientFrom("127.0.0.1", "trail-test/1.0 (hallmark)", "")
		a := newKey(t)
		r := e.post(t, a, e.base+"/acme/new-account", map[string]any{"termsOfServiceAgreed": true})
		wantStatus(t, r, http.StatusCreated)
		a.kid = r.header.Get("Location")
		wantTrail(t, e, r, store.ActionAccountCreated, lastSegment(a.kid), "")

		r = e.post(t, a, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs("www.denied.example")})
		wantProblem(t, e, r, acme.ProblemRejectedIdentifier, http.StatusBadRequest)
		wantTrail(t, e, r, store.ActionOrderRefused, "", "dns:www.denied.example")

		o, loc := e.newOrder(t, a, dnsIDs("trail.example"))
		e.validate(t, a, o)
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		r = e.post(t, a, o.Finalize, map[string]any{"csr": b64(csrFor(t, key, "other.example"))})
		wantProblem(t, e, r, acme.ProblemBadCSR, http.StatusBadRequest)
		wantTrail(t, e, r, store.ActionFinalizeRefused, lastSegment(loc), "badCSR")

		// A stale nonce is no refusal of a certificate: nothing recorded.
		r = e.post(t, a, o.Finalize, map[string]any{"csr": b64(csrFor(t, key, "trail.example"))}, signOpts{nonce: "bm90LWEtbm9uY2U"})
		wantProblem(t, e, r, acme.ProblemBadNonce, http.StatusBadRequest)
		if evs := trailOfRequest(t, e, r.header.Get("X-Request-Id")); len(evs) != 0 {
			t.Errorf("a bad nonce left trail events %+v", evs)
		}

		fail.Store(true)
		defer fail.Store(false)
		r = e.post(t, a, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs("again.denied.example")})
		wantProblem(t, e, r, acme.ProblemRejectedIdentifier, http.StatusBadRequest)
		id := r.header.Get("X-Request-Id")
		if !strings.Contains(logs.String(), "request_id="+id) || !strings.Contains(logs.String(), "audit table on fire") {
			t.Errorf("the failed trail record was not logged with request_id=%s; log:\n%s", id, logs.String())
		}
	})
}

// trailOfRequest is the trail events of request id.
func trailOfRequest(t *testing.T, e *env, id string) []store.AuditEvent {
	t.Helper()
	evs, _, err := e.st.AuditFind(context.Background(), store.AuditFilter{RequestID: id}, store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// wantTrail asserts that the request answered r left one trail event of
// action on subject, whose detail names detail, from this test's client.
func wantTrail(t *testing.T, e *env, r *response, action, subject, detail string) {
	t.Helper()
	id := r.header.Get("X-Request-Id")
	evs := trailOfRequest(t, e, id)
	if len(evs) != 1 {
		t.Fatalf("request %s left %d trail events, want 1 (%s): %+v", id, len(evs), action, evs)
	}
	ev := evs[0]
	want := origin.Origin{RequestID: id, ClientAddr: "127.0.0.1", UserAgent: "trail-test/1.0 (hallmark)"}
	if ev.Action != action || !ev.Trail || ev.Origin != want || ev.Subject != subject || !strings.Contains(ev.Detail, detail) || !strings.HasPrefix(ev.Actor, "acme:") {
		t.Errorf("trail event %+v, want %s on %q naming %q from %+v", ev, action, subject, detail, want)
	}
}
