package worker_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/protocol/serverconf"
	"github.com/hallmark-ca/hallmark/signer/relay"
	"github.com/hallmark-ca/hallmark/signer/signerconf"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/tests/pebble"
	"github.com/hallmark-ca/hallmark/worker"
)

// upstreamProxy carries a relay's requests to a real Pebble. It counts
// the renewalInfo requests, can answer them 503 with a Retry-After (an
// upstream in trouble), and can hide renewalInfo from the directory (an
// upstream without ARI).
type upstreamProxy struct {
	base  http.RoundTripper
	noARI bool

	mu          sync.Mutex
	asked       int
	unavailable string // when set, renewalInfo answers 503 with this Retry-After
}

func (u *upstreamProxy) set(unavailable string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.unavailable = unavailable
}

func (u *upstreamProxy) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.asked
}

func (u *upstreamProxy) RoundTrip(req *http.Request) (*http.Response, error) {
	u.mu.Lock()
	isARI := strings.Contains(req.URL.Path, "/renewalInfo/") // Pebble's /draft-ietf-acme-ari-03/renewalInfo/<certID>
	if isARI {
		u.asked++
	}
	unavailable := u.unavailable
	u.mu.Unlock()
	if isARI && unavailable != "" {
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable", Request: req,
			Header: http.Header{"Retry-After": {unavailable}, "Content-Type": {"application/problem+json"}},
			Body:   io.NopCloser(strings.NewReader(`{"type":"urn:ietf:params:acme:error:serverInternal","detail":"busy"}`))}, nil
	}
	resp, err := u.base.RoundTrip(req)
	if err != nil || !u.noARI || req.Method != http.MethodGet || !strings.HasSuffix(req.URL.Path, "/dir") {
		return resp, err
	}
	var dir map[string]any
	err = json.NewDecoder(resp.Body).Decode(&dir)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	delete(dir, "renewalInfo")
	b, _ := json.Marshal(dir)
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
	resp.Header.Del("Content-Length")
	return resp, nil
}

// ariCertID is a certificate's RFC 9773 §4.1 identifier.
func ariCertID(x *x509.Certificate) string {
	ser := x.SerialNumber.Bytes()
	if ser[0]&0x80 != 0 {
		ser = append([]byte{0}, ser...)
	}
	return base64.RawURLEncoding.EncodeToString(x.AuthorityKeyId) + "." + base64.RawURLEncoding.EncodeToString(ser)
}

type ariWindow struct {
	Start, End  time.Time
	Explanation string
}

// getRenewalInfo reads renewalInfo for x from the ACME server whose
// directory is dirURL, as an ARI client does.
func getRenewalInfo(t *testing.T, c *http.Client, dirURL string, x *x509.Certificate) ariWindow {
	t.Helper()
	resp, err := c.Get(dirURL)
	if err != nil {
		t.Fatal(err)
	}
	var dir struct {
		RenewalInfo string `json:"renewalInfo"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&dir)
	resp.Body.Close()
	resp, err = c.Get(dir.RenewalInfo + "/" + ariCertID(x))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		SuggestedWindow struct{ Start, End time.Time } `json:"suggestedWindow"`
		ExplanationURL  string                         `json:"explanationURL"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); resp.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("renewalInfo of %x at %s: %d, %v", x.SerialNumber, dir.RenewalInfo, resp.StatusCode, err)
	}
	return ariWindow{doc.SuggestedWindow.Start, doc.SuggestedWindow.End, doc.ExplanationURL}
}

// moveAtPebble moves x's window at Pebble (its management interface), as
// an upstream CA does before it revokes in an incident.
func moveAtPebble(t *testing.T, p *pebble.Server, x *x509.Certificate, w ariWindow) {
	t.Helper()
	doc, _ := json.Marshal(map[string]any{"suggestedWindow": map[string]time.Time{"start": w.Start, "end": w.End}, "explanationURL": w.Explanation})
	body, _ := json.Marshal(map[string]string{"Certificate": string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: x.Raw})), "ARIResponse": string(doc)})
	resp, err := (&http.Client{Transport: p.Transport}).Post(p.ManagementURL+"/set-renewal-info/", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("moving the window at Pebble: %s", resp.Status)
	}
}

func sameWindow(a, b ariWindow) bool {
	return a.Start.Equal(b.Start.Truncate(time.Second)) && a.End.Equal(b.End.Truncate(time.Second)) && a.Explanation == b.Explanation
}

// TestUpstreamRenewalWindows: a relay's certificates follow the upstream's
// renewal windows (RFC 9773) once the worker refreshes them, with a real
// Pebble as the upstream and Hallmark's real renewalInfo handler in front.
// A window the upstream moved is served with its explanationURL; one it did
// not move is the upstream's own; each run asks about at most
// renewal_info_per_run certificates and none again before the upstream's
// Retry-After; an upstream that answers 503 with Retry-After is not asked
// again before it passes; an upstream without ARI leaves Hallmark's
// default window and is never asked; an operator's move is served when it
// ends before the upstream's window, and the upstream's otherwise.
func TestUpstreamRenewalWindows(t *testing.T) {
	p := pebble.Start(t)
	ctx := context.Background()
	withARI, noARI := &upstreamProxy{base: p.Transport}, &upstreamProxy{base: p.Transport, noARI: true}
	newRelay := func(st store.Store, name string, tr http.RoundTripper) *relay.Backend {
		b, err := relay.New(relay.Config{Name: name, Transport: tr, Timeout: 4 * time.Second, Journal: st,
			Relay: signerconf.Relay{DirectoryURL: p.DirectoryURL, RenewalInfoPerRun: 2, AccountKey: filepath.Join(t.TempDir(), name+".key")}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	def := profile.Default()
	relayed, plainProfile := def, def
	relayed.Backend, relayed.Signer = "relay", "up"
	plainProfile.Backend, plainProfile.Signer = "relay", "plain"
	r := newRig(t, rigOpts{profiles: map[string]profile.Profile{"upstream": relayed, "plain": plainProfile},
		backendsOn: func(st store.Store) map[string]worker.Backend {
			return map[string]worker.Backend{"upstream": newRelay(st, "up", withARI), "plain": newRelay(st, "plain", noARI)}
		}})
	backends := r.backends
	// The handler, called as River calls it, so each run's requests count.
	w, err := worker.New(r.cfg, r.st, worker.Options{Backends: backends})
	if err != nil {
		t.Fatal(err)
	}
	upArgs := jobs.UpstreamRenewalArgs{IssuerID: "relay:up", Profile: "upstream"}
	plainArgs := jobs.UpstreamRenewalArgs{IssuerID: "relay:plain", Profile: "plain"}
	if got := w.UpstreamRenewals(); !slices.Equal(got, []jobs.UpstreamRenewalArgs{plainArgs, upArgs}) {
		t.Fatalf("the worker schedules %+v, want one refresh per relay", got)
	}

	// Hallmark's frontend, on the same database.
	ts := httptest.NewUnstartedServer(http.NotFoundHandler())
	fcfg := protocol.Config{Server: serverconf.DefaultServer(), Profiles: r.cfg.Profiles, DefaultProfile: "default"}
	fcfg.Server.BaseURL = "http://" + ts.Listener.Addr().String()
	srv, err := protocol.New(fcfg, r.st, protocol.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ts.Config.Handler = srv.Handler()
	ts.Start()
	t.Cleanup(ts.Close)
	hallmark := func(x *x509.Certificate) ariWindow {
		return getRenewalInfo(t, ts.Client(), fcfg.Server.BaseURL+"/directory", x)
	}
	upstream := func(x *x509.Certificate) ariWindow {
		return getRenewalInfo(t, &http.Client{Transport: p.Transport}, p.DirectoryURL, x)
	}

	acct := r.account(t)
	serials := map[*x509.Certificate]string{} // as the store keeps them
	issue := func(profile, name string) *x509.Certificate {
		t.Helper()
		o := r.order(t, acct, profile, name)
		r.ready(t, o)
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if _, claimed, err := r.st.OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, o.Profile, csrFor(t, key, name), nil); err != nil || !claimed {
			t.Fatalf("finalize: %v %v", claimed, err)
		}
		c, x := r.issued(t, o.ID)
		serials[x] = c.Serial
		return x
	}
	a, b, c := issue("upstream", "a.relay.test"), issue("upstream", "b.relay.test"), issue("upstream", "c.relay.test")
	e := issue("plain", "e.plain.test")
	defaults := map[*x509.Certificate]ariWindow{}
	for _, x := range []*x509.Certificate{a, b, c, e} {
		defaults[x] = hallmark(x)
		if defaults[x].Explanation != "" || sameWindow(defaults[x], upstream(x)) {
			t.Fatalf("before any refresh %x is served %+v; want Hallmark's default, which is not Pebble's %+v", x.SerialNumber, defaults[x], upstream(x))
		}
	}
	now := time.Now().UTC().Truncate(time.Second)
	incident := ariWindow{now.Add(-2 * time.Hour), now.Add(-time.Hour), "https://upstream.example/incident-42"}
	moveAtPebble(t, p, a, incident)

	for _, run := range []struct {
		name  string
		asked int
	}{
		{"the first run asks about renewal_info_per_run (2) of 3 due", 2},
		{"the second asks about the one left", 1},
		{"the third asks none: Pebble's Retry-After (6 h) has not passed", 0},
	} {
		before := withARI.count()
		if err := w.RefreshUpstreamRenewals(ctx, upArgs); err != nil {
			t.Fatalf("%s: %v", run.name, err)
		}
		if got := withARI.count() - before; got != run.asked {
			t.Fatalf("%s: %d renewalInfo requests to the upstream, want %d", run.name, got, run.asked)
		}
	}
	if got := hallmark(a); !sameWindow(got, incident) {
		t.Errorf("the certificate whose upstream window moved is served %+v, want the upstream's %+v", got, incident)
	}
	for _, x := range []*x509.Certificate{b, c} {
		if got, want := hallmark(x), upstream(x); !sameWindow(got, want) {
			t.Errorf("%x is served %+v, want the upstream's own window %+v", x.SerialNumber, got, want)
		}
	}

	t.Run("an upstream without ARI", func(t *testing.T) {
		if err := w.RefreshUpstreamRenewals(ctx, plainArgs); err != nil {
			t.Fatal(err)
		}
		if n := noARI.count(); n != 0 {
			t.Errorf("%d renewalInfo requests to an upstream whose directory offers none", n)
		}
		if _, err := r.st.UpstreamWindowBySerial(ctx, serials[e]); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("an upstream window was stored: %v", err)
		}
		if got := hallmark(e); !sameWindow(got, defaults[e]) {
			t.Errorf("served %+v, want Hallmark's default %+v", got, defaults[e])
		}
	})

	t.Run("an operator's move", func(t *testing.T) {
		move := func(x *x509.Certificate, w ariWindow) {
			t.Helper()
			serial := serials[x]
			if moved, err := r.st.RenewalMove(ctx, store.RenewalSelector{Serial: serial}, w.Start, w.End, "key rotation drill",
				store.AuditEvent{Actor: "cli:test", Action: "ari.move", Subject: serial}); err != nil || len(moved) != 1 {
				t.Fatalf("RenewalMove(%s) = %v, %v", serial, moved, err)
			}
		}
		earlier := ariWindow{now.Add(-3 * time.Hour), now.Add(-2 * time.Hour), ""}
		move(b, earlier) // ends before the upstream's: the operator's is served
		later := ariWindow{now.Add(-30 * time.Minute), now.Add(time.Hour), ""}
		move(a, later) // ends after the upstream's moved window: the upstream's is
		for _, tc := range []struct {
			name string
			x    *x509.Certificate
			want ariWindow
			ours bool // the explanation is Hallmark's page of the move
		}{
			{"a move ending first is served", b, earlier, true},
			{"an upstream window ending first is served", a, incident, false},
		} {
			got := hallmark(tc.x)
			if ours := strings.Contains(got.Explanation, "/renewal-explanation/"); !got.Start.Equal(tc.want.Start) || !got.End.Equal(tc.want.End) || ours != tc.ours ||
				(!tc.ours && got.Explanation != tc.want.Explanation) {
				t.Errorf("%s: served %+v, want %+v (Hallmark's explanation: %v)", tc.name, got, tc.want, tc.ours)
			}
		}
	})

	t.Run("an upstream answering 503 with Retry-After", func(t *testing.T) {
		d := issue("upstream", "d.relay.test") // never asked about: due
		withARI.set("120")
		before := withARI.count()
		if err := w.RefreshUpstreamRenewals(ctx, upArgs); err != nil {
			t.Fatal(err)
		}
		if got := withARI.count() - before; got != 1 {
			t.Fatalf("%d renewalInfo requests in the run the upstream answered 503, want 1 (the run stops)", got)
		}
		withARI.set("") // the upstream is back, but asked to be left alone for 120 s
		if err := w.RefreshUpstreamRenewals(ctx, upArgs); err != nil {
			t.Fatal(err)
		}
		if got := withARI.count() - before; got != 1 {
			t.Errorf("%d renewalInfo requests within the upstream's Retry-After, want none after the 503", got-1)
		}
		if got := hallmark(d); got.Explanation != "" {
			t.Errorf("served %+v, want Hallmark's default window", got)
		}
		if _, err := r.st.UpstreamWindowBySerial(ctx, serials[d]); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a window was stored from a 503: %v", err)
		}
	})
}
