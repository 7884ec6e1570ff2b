package protocol_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/protocol"
	"github.com/hallmark-ca/hallmark/protocol/acme"
)

func TestDirectory(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		r := e.get(t, http.MethodGet, "/directory")
		wantStatus(t, r, http.StatusOK)
		if ct := r.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type = %q", ct)
		}
		if r.header.Get("Replay-Nonce") == "" {
			t.Error("directory has no Replay-Nonce")
		}
		var d struct {
			NewNonce, NewAccount, NewOrder, RevokeCert, KeyChange, NewAuthz, RenewalInfo string
			Meta                                                                         struct {
				TermsOfService          string            `json:"termsOfService"`
				Website                 string            `json:"website"`
				CAAIdentities           []string          `json:"caaIdentities"`
				ExternalAccountRequired *bool             `json:"externalAccountRequired"`
				Profiles                map[string]string `json:"profiles"`
			}
		}
		r.json(t, &d)
		want := map[string]string{
			d.NewNonce: "/acme/new-nonce", d.NewAccount: "/acme/new-account", d.NewOrder: "/acme/new-order",
			d.RevokeCert: "/acme/revoke-cert", d.KeyChange: "/acme/key-change",
		}
		for got, path := range want {
			if got != e.base+path {
				t.Errorf("directory URL %q, want %q", got, e.base+path)
			}
		}
		// newAuthz only when the default profile allows it (ari_eab_test.go);
		// renewalInfo (RFC 9773) always.
		if d.NewAuthz != "" || d.RenewalInfo != e.base+"/acme/renewal-info" {
			t.Errorf("directory newAuthz %q / renewalInfo %q", d.NewAuthz, d.RenewalInfo)
		}
		m := d.Meta
		if m.TermsOfService != e.cfg.Server.TermsOfService || m.Website != e.cfg.Server.Website {
			t.Errorf("meta terms/website = %q %q", m.TermsOfService, m.Website)
		}
		if len(m.CAAIdentities) != 1 || m.CAAIdentities[0] != "hallmark.invalid" {
			t.Errorf("caaIdentities = %v", m.CAAIdentities)
		}
		if m.ExternalAccountRequired == nil || *m.ExternalAccountRequired {
			t.Errorf("externalAccountRequired = %v, want present and false", m.ExternalAccountRequired)
		}
		if len(m.Profiles) != 3 || m.Profiles["default"] != e.cfg.Profiles["default"].Description || m.Profiles["short"] == "" {
			t.Errorf("profiles = %v", m.Profiles)
		}

		r = e.postRaw(t, e.base+"/directory", "application/jose+json", []byte("{}"))
		wantProblem(t, e, r, acme.ProblemMalformed, http.StatusMethodNotAllowed)
		if a := r.header.Get("Allow"); a != "GET, HEAD" {
			t.Errorf("Allow = %q", a)
		}
	})
}

func TestDirectoryExternalAccountRequired(t *testing.T) {
	t.Parallel()
	withStores(t, func(c *protocol.Config) { c.Server.ExternalAccountRequired = true }, func(t *testing.T, e *env) {
		r := e.get(t, http.MethodGet, "/directory")
		if !strings.Contains(string(r.body), `"externalAccountRequired":true`) {
			t.Errorf("directory meta does not say externalAccountRequired: %s", r.body)
		}
		a := newKey(t)
		r = e.post(t, a, e.base+"/acme/new-account", map[string]any{"termsOfServiceAgreed": true})
		wantProblem(t, e, r, acme.ProblemExternalAccountRequired, http.StatusUnauthorized)
	})
}

func TestNewNonce(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		seen := map[string]bool{}
		for _, c := range []struct {
			method string
			status int
		}{{http.MethodHead, http.StatusOK}, {http.MethodGet, http.StatusNoContent}, {http.MethodHead, http.StatusOK}} {
			r := e.get(t, c.method, "/acme/new-nonce")
			wantStatus(t, r, c.status)
			n := r.header.Get("Replay-Nonce")
			if n == "" || seen[n] {
				t.Errorf("%s new-nonce: Replay-Nonce %q empty or repeated", c.method, n)
			}
			seen[n] = true
			if cc := r.header.Get("Cache-Control"); cc != "no-store" {
				t.Errorf("%s new-nonce: Cache-Control = %q, want no-store", c.method, cc)
			}
			if idx := r.links("index"); len(idx) != 1 || idx[0] != e.base+"/directory" {
				t.Errorf("new-nonce Link index = %v", idx)
			}
		}
		r := e.postRaw(t, e.base+"/acme/new-nonce", "application/jose+json", []byte("{}"))
		wantProblem(t, e, r, acme.ProblemMalformed, http.StatusMethodNotAllowed)
	})
}

func TestHealthReadyMetrics(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		wantStatus(t, e.get(t, http.MethodGet, "/healthz"), http.StatusOK)
		wantStatus(t, e.get(t, http.MethodGet, "/readyz"), http.StatusOK)
		e.get(t, http.MethodGet, "/directory")
		e.postRaw(t, e.base+"/acme/new-order", "text/plain", []byte("x"))
		r := e.get(t, http.MethodGet, "/metrics")
		wantStatus(t, r, http.StatusOK)
		for _, want := range []string{
			`hallmark_frontend_requests_total{endpoint="directory",status="200"} 1`,
			`hallmark_frontend_requests_total{endpoint="new_order",status="415"} 1`,
			`hallmark_frontend_request_duration_seconds_bucket{endpoint="directory"`,
		} {
			if !strings.Contains(string(r.body), want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})
}

func TestUnknownPath(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		r := e.get(t, http.MethodGet, "/acme/nothing-here")
		wantProblem(t, e, r, acme.ProblemMalformed, http.StatusNotFound)
		// A certID that names no certificate of this CA (RFC 9773 §4.1).
		r = e.get(t, http.MethodGet, "/acme/renewal-info/YWJj.AQI")
		wantProblem(t, e, r, acme.ProblemMalformed, http.StatusNotFound)
	})
}
