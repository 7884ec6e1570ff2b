package protocol_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/hallmark-ca/hallmark/protocol"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

type renewalInfoJSON struct {
	SuggestedWindow struct {
		Start time.Time `json:"start"`
		End   time.Time `json:"end"`
	} `json:"suggestedWindow"`
	ExplanationURL string `json:"explanationURL"`
}

// certIDFor computes an RFC 9773 §4.1 certID the way a client does.
func certIDFor(t *testing.T, der []byte) string {
	t.Helper()
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ser := c.SerialNumber.Bytes()
	if ser[0]&0x80 != 0 {
		ser = append([]byte{0}, ser...)
	}
	return b64(c.AuthorityKeyId) + "." + b64(ser)
}

func (e *env) renewalInfo(t *testing.T, certID string) (*response, renewalInfoJSON) {
	t.Helper()
	var dir struct {
		RenewalInfo string `json:"renewalInfo"`
	}
	e.get(t, http.MethodGet, "/directory").json(t, &dir)
	if dir.RenewalInfo != e.base+"/acme/renewal-info" {
		t.Fatalf("directory renewalInfo = %q", dir.RenewalInfo)
	}
	req, _ := http.NewRequest(http.MethodGet, dir.RenewalInfo+"/"+certID, nil)
	r := e.do(t, req)
	var ri renewalInfoJSON
	if r.status == http.StatusOK {
		r.json(t, &ri)
	}
	return r, ri
}

// TestRenewalInfo: the default window is the middle third of the validity,
// with Retry-After; an operator's move puts it in the past with an
// explanation page; unknown or foreign certIDs are 404, garbage 400.
func TestRenewalInfo(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		a := e.register(t)
		c := e.issue(t, a, "", "ari.example.com")
		leaf, _ := x509.ParseCertificate(c.der)
		id := certIDFor(t, c.der)

		r, ri := e.renewalInfo(t, id)
		wantStatus(t, r, http.StatusOK)
		life := leaf.NotAfter.Sub(leaf.NotBefore)
		wantStart, wantEnd := leaf.NotBefore.Add(life/3), leaf.NotBefore.Add(2*life/3)
		if d := ri.SuggestedWindow.Start.Sub(wantStart); d < -time.Second || d > time.Second {
			t.Errorf("window start %v, want %v (a third into the validity)", ri.SuggestedWindow.Start, wantStart)
		}
		if d := ri.SuggestedWindow.End.Sub(wantEnd); d < -time.Second || d > time.Second {
			t.Errorf("window end %v, want %v (two thirds into the validity)", ri.SuggestedWindow.End, wantEnd)
		}
		if ri.ExplanationURL != "" {
			t.Errorf("explanationURL %q on an unmoved window", ri.ExplanationURL)
		}
		if ra := r.header.Get("Retry-After"); ra != "21600" {
			t.Errorf("Retry-After = %q, want 21600 (6 hours)", ra)
		}

		// The operator moves it into the past (the CLI and admin panel call this).
		now := time.Now()
		moved, err := e.st.RenewalMove(context.Background(), store.RenewalSelector{Serial: c.serial}, now.Add(-2*time.Hour), now.Add(-time.Hour),
			"key compromise <script>drill</script>", store.AuditEvent{Actor: "cli:test", Action: "ari.move", Subject: c.serial})
		if err != nil || len(moved) != 1 || moved[0] != c.serial {
			t.Fatalf("RenewalMove = %v, %v", moved, err)
		}
		r, ri = e.renewalInfo(t, id)
		wantStatus(t, r, http.StatusOK)
		if !ri.SuggestedWindow.End.Before(time.Now()) {
			t.Errorf("moved window ends %v, want in the past", ri.SuggestedWindow.End)
		}
		if !strings.HasPrefix(ri.ExplanationURL, e.base+"/renewal-explanation/") {
			t.Fatalf("explanationURL = %q", ri.ExplanationURL)
		}
		resp, err := e.hc.Get(ri.ExplanationURL)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(page), "key compromise &lt;script&gt;drill&lt;/script&gt;") {
			t.Errorf("explanation page %d: %s", resp.StatusCode, page)
		}

		// A serial this CA never issued; a right serial with another AKI; garbage.
		r, _ = e.renewalInfo(t, strings.Split(id, ".")[0]+"."+b64([]byte{0x01, 0x02}))
		wantProblem(t, e, r, acme.ProblemMalformed, http.StatusNotFound)
		r, _ = e.renewalInfo(t, b64([]byte("other-aki"))+"."+strings.Split(id, ".")[1])
		wantProblem(t, e, r, acme.ProblemMalformed, http.StatusNotFound)
		r, _ = e.renewalInfo(t, "not-a-cert-id")
		wantProblem(t, e, r, acme.ProblemMalformed, http.StatusBadRequest)

		// An empty selector is refused rather than moving everything.
		if _, err := e.st.RenewalMove(context.Background(), store.RenewalSelector{}, now.Add(-time.Hour), now, "x", store.AuditEvent{Actor: "cli:test", Action: "ari.move"}); err == nil {
			t.Errorf("RenewalMove with an empty selector succeeded")
		}
	})
}

// TestRenewalWindowPerProfile: a profile's configured fractions.
func TestRenewalWindowPerProfile(t *testing.T) {
	t.Parallel()
	withStores(t, func(c *protocol.Config) {
		p := c.Profiles["default"]
		p.RenewalWindowStart, p.RenewalWindowEnd = 0.5, 0.75
		c.Profiles["default"] = p
		c.Server.RenewalInfoRetryAfterSeconds = 60
	}, func(t *testing.T, e *env) {
		a := e.register(t)
		c := e.issue(t, a, "", "frac.example.com")
		leaf, _ := x509.ParseCertificate(c.der)
		r, ri := e.renewalInfo(t, certIDFor(t, c.der))
		wantStatus(t, r, http.StatusOK)
		life := leaf.NotAfter.Sub(leaf.NotBefore)
		if d := ri.SuggestedWindow.Start.Sub(leaf.NotBefore.Add(life / 2)); d < -time.Second || d > time.Second {
			t.Errorf("window start %v is not half-way", ri.SuggestedWindow.Start)
		}
		if r.header.Get("Retry-After") != "60" {
			t.Errorf("Retry-After = %q, want 60", r.header.Get("Retry-After"))
		}
	})
}

// TestReplaces: newOrder "replaces" (RFC 9773 §5) marks the certificate;
// a second replacing order is alreadyReplaced; another account's
// certificate is refused; a failed replacement frees it, and so does one
// that expired unfinished ("not 'invalid'" is what the client reads).
func TestReplaces(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		a := e.register(t)
		other := e.register(t)
		c := e.issue(t, a, "", "replace.example.com")
		id := certIDFor(t, c.der)
		order := func(acct *account, replaces string) *response {
			return e.post(t, acct, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs("replace.example.com"), "replaces": replaces})
		}
		r := order(other, id)
		wantProblem(t, e, r, acme.ProblemUnauthorized, http.StatusForbidden)
		r = order(a, "garbage")
		wantProblem(t, e, r, acme.ProblemMalformed, http.StatusBadRequest)
		// An order for other names is no renewal of it (RFC 9773 §5).
		r = e.post(t, a, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs("unrelated.example.com"), "replaces": id})
		if p := wantProblem(t, e, r, acme.ProblemMalformed, http.StatusBadRequest); !strings.Contains(p.Detail, "shares no identifier") {
			t.Errorf("replacing with other names: %q", p.Detail)
		}

		r = order(a, id)
		wantStatus(t, r, http.StatusCreated)
		var o struct {
			Replaces string `json:"replaces"`
			Status   string `json:"status"`
		}
		r.json(t, &o)
		if o.Replaces != id {
			t.Errorf("order replaces = %q, want %q", o.Replaces, id)
		}
		first := r.header.Get("Location")
		cert, err := e.st.CertificateBySerial(context.Background(), c.serial)
		if err != nil || cert.ReplacedBy != lastSegment(first) {
			t.Fatalf("certificate ReplacedBy = %q (%v), want %s", cert.ReplacedBy, err, lastSegment(first))
		}
		r = order(a, id)
		wantProblem(t, e, r, acme.ProblemAlreadyReplaced, http.StatusConflict)

		// The replacing order fails (its authorization is deactivated):
		// the client may replace again.
		var of orderJSON
		e.post(t, a, first, nil).json(t, &of)
		wantStatus(t, e.post(t, a, of.Authorizations[0], map[string]any{"status": "deactivated"}), http.StatusOK)
		r = order(a, id)
		wantStatus(t, r, http.StatusCreated)

		// That order runs past its expiry unfinished; housekeeping has not
		// moved it yet, but it reads as invalid, so the client may replace
		// the certificate again.
		third := r.header.Get("Location")
		e.expire(t, "orders", lastSegment(third))
		if o := e.getOrder(t, a, third); o.Status != acme.StatusInvalid {
			t.Fatalf("the expired replacing order reads %s", o.Status)
		}
		r = order(a, id)
		wantStatus(t, r, http.StatusCreated)
	})
}

// TestEABNullWhenNotRequired: "externalAccountBinding": null, as client
// libraries write an absent optional member, is no binding: on a server
// that does not require one (the directory says so) the account is
// created, not refused with externalAccountRequired.
func TestEABNullWhenNotRequired(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		a := newKey(t)
		r := e.post(t, a, e.base+"/acme/new-account", map[string]any{"termsOfServiceAgreed": true, "externalAccountBinding": nil})
		wantStatus(t, r, http.StatusCreated)
	})
}

// eabBinding signs an externalAccountBinding for acct's key (RFC 8555
// §7.3.4) as lego and certbot do.
// Extra protected header members, if any, are added.
func eabBinding(t *testing.T, acct *account, kid string, mac []byte, url string, extra ...string) map[string]any {
	t.Helper()
	jwk, err := json.Marshal(jose.JSONWebKey{Key: acct.key.Public()})
	if err != nil {
		t.Fatal(err)
	}
	h := map[string]string{"alg": "HS256", "kid": kid, "url": url}
	for i := 0; i+1 < len(extra); i += 2 {
		h[extra[i]] = extra[i+1]
	}
	hdr, _ := json.Marshal(h)
	protected, payload := b64(hdr), b64(jwk)
	m := hmac.New(sha256.New, mac)
	m.Write([]byte(protected + "." + payload))
	return map[string]any{"protected": protected, "payload": payload, "signature": b64(m.Sum(nil))}
}

// TestExternalAccountBinding: required EAB, one binding per key, bad MACs,
// the binding's identifier limits and pre-validated names.
func TestExternalAccountBinding(t *testing.T) {
	t.Parallel()
	withStores(t, func(c *protocol.Config) { c.Server.ExternalAccountRequired = true }, func(t *testing.T, e *env) {
		ctx := context.Background()
		url := e.base + "/acme/new-account"
		mac := make([]byte, 32)
		_, _ = rand.Read(mac)
		if _, err := e.st.EABCreate(ctx, store.EABKey{ID: "kid-1", MACKey: mac, Label: "team a",
			AllowedDomains: []string{"team-a.example"}, AllowedIPRanges: []string{"192.0.2.0/24"}, PreValidated: true},
			store.AuditEvent{Actor: "test", Action: "eab.create", Subject: "kid-1"}); err != nil {
			t.Fatal(err)
		}
		var dir struct {
			Meta struct {
				ExternalAccountRequired bool `json:"externalAccountRequired"`
			} `json:"meta"`
		}
		e.get(t, http.MethodGet, "/directory").json(t, &dir)
		if !dir.Meta.ExternalAccountRequired {
			t.Errorf("directory meta.externalAccountRequired is false")
		}

		a := newKey(t)
		body := map[string]any{"termsOfServiceAgreed": true}
		wantProblem(t, e, e.post(t, a, url, body), acme.ProblemExternalAccountRequired, http.StatusUnauthorized)

		bad := append([]byte{}, mac...)
		bad[0] ^= 1
		body["externalAccountBinding"] = eabBinding(t, a, "kid-1", bad, url)
		wantProblem(t, e, e.post(t, a, url, body), acme.ProblemUnauthorized, http.StatusForbidden)
		body["externalAccountBinding"] = eabBinding(t, a, "kid-unknown", mac, url)
		wantProblem(t, e, e.post(t, a, url, body), acme.ProblemUnauthorized, http.StatusForbidden)
		body["externalAccountBinding"] = eabBinding(t, a, "kid-1", mac, e.base+"/acme/new-order")
		wantProblem(t, e, e.post(t, a, url, body), acme.ProblemMalformed, http.StatusBadRequest)
		// RFC 8555 §7.3.4: "The "nonce" field MUST NOT be present".
		body["externalAccountBinding"] = eabBinding(t, a, "kid-1", mac, url, "nonce", e.nonce(t))
		if p := wantProblem(t, e, e.post(t, a, url, body), acme.ProblemMalformed, http.StatusBadRequest); !strings.Contains(p.Detail, "nonce") {
			t.Errorf("binding with a nonce: %q", p.Detail)
		}
		// The binding's payload is another key than the one signing.
		body["externalAccountBinding"] = eabBinding(t, newKey(t), "kid-1", mac, url)
		wantProblem(t, e, e.post(t, a, url, body), acme.ProblemUnauthorized, http.StatusForbidden)

		body["externalAccountBinding"] = eabBinding(t, a, "kid-1", mac, url)
		r := e.post(t, a, url, body)
		wantStatus(t, r, http.StatusCreated)
		a.kid = r.header.Get("Location")
		k, err := e.st.AccountEAB(ctx, lastSegment(a.kid))
		if err != nil || k.ID != "kid-1" {
			t.Fatalf("AccountEAB = %+v, %v; want kid-1", k, err)
		}
		// The same key again for the same account key: the existing account.
		wantStatus(t, e.post(t, &account{key: a.key, alg: a.alg}, url, body), http.StatusOK)
		// A key binds once.
		b := newKey(t)
		body["externalAccountBinding"] = eabBinding(t, b, "kid-1", mac, url)
		wantProblem(t, e, e.post(t, b, url, body), acme.ProblemUnauthorized, http.StatusForbidden)

		// Limits: outside the binding is rejectedIdentifier.
		r = e.post(t, a, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs("www.team-a.example", "evil.example")})
		p := wantProblem(t, e, r, acme.ProblemRejectedIdentifier, http.StatusBadRequest)
		if p.Identifier == nil || p.Identifier.Value != "evil.example" {
			t.Errorf("rejected identifier = %+v, want evil.example", p.Identifier)
		}
		r = e.post(t, a, e.base+"/acme/new-order", map[string]any{"identifiers": []acme.Identifier{{Type: acme.IdentifierIP, Value: "198.51.100.1"}}})
		wantProblem(t, e, r, acme.ProblemRejectedIdentifier, http.StatusBadRequest)

		// Pre-validated: authorizations born valid, the order ready at once,
		// the audit log says so.
		o, _ := e.newOrder(t, a, append(dnsIDs("www.team-a.example", "team-a.example"), acme.Identifier{Type: acme.IdentifierIP, Value: "192.0.2.7"}))
		if o.Status != acme.StatusReady {
			t.Fatalf("pre-validated order is %s, want ready", o.Status)
		}
		for _, u := range o.Authorizations {
			if az := e.authz(t, a, u); az.Status != acme.StatusValid {
				t.Errorf("authorization %s is %s, want valid", u, az.Status)
			}
		}
		evs, _, err := e.st.AuditList(ctx, store.Page{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ev := range evs {
			if ev.Action == "authz.prevalidated" && strings.Contains(ev.Detail, "kid-1") {
				n++
			}
		}
		if n != 3 {
			t.Errorf("%d authz.prevalidated audit events, want 3", n)
		}
	})
}

// registerBound creates an account bound to a new pre-validating external
// account key kid, limited to team-a.example and 192.0.2.0/24.
func (e *env) registerBound(t *testing.T, kid string) *account {
	t.Helper()
	mac := make([]byte, 32)
	_, _ = rand.Read(mac)
	if _, err := e.st.EABCreate(context.Background(), store.EABKey{ID: kid, MACKey: mac, Label: "team a",
		AllowedDomains: []string{"team-a.example"}, AllowedIPRanges: []string{"192.0.2.0/24"}, PreValidated: true},
		store.AuditEvent{Actor: "test", Action: "eab.create", Subject: kid}); err != nil {
		t.Fatal(err)
	}
	a := newKey(t)
	url := e.base + "/acme/new-account"
	r := e.post(t, a, url, map[string]any{"termsOfServiceAgreed": true, "externalAccountBinding": eabBinding(t, a, kid, mac, url)})
	wantStatus(t, r, http.StatusCreated)
	a.kid = r.header.Get("Location")
	return a
}

// TestPreValidatedReuse: an authorization born valid (a pre-validating
// binding vouched for its name) is reused, by newOrder or newAuthz, only
// where the request's own new authorization for the name would be born
// valid too: the account's binding still pre-validates the name, and the
// request's profile offers a challenge type for it (one that offers none
// refuses the name, pre-validated or not). Otherwise the request is
// answered as if the earlier order had never been made. Before, a born
// valid authorization was reused by any profile, whatever the binding had
// become: a wildcard or an IP address a profile cannot validate was ready
// at once, and so was a name the binding no longer pre-validates.
func TestPreValidatedReuse(t *testing.T) {
	t.Parallel()
	withStores(t, func(c *protocol.Config) {
		def := c.Profiles["default"]
		httpOnly, dnsOnly := def, def
		httpOnly.Challenges = []string{"http-01"} // wildcards allowed, but no dns-01 to validate one
		dnsOnly.Challenges = []string{"dns-01"}   // IP addresses allowed, but nothing to validate one
		dnsOnly.AllowPreAuthorization = true
		c.Profiles["http-only"], c.Profiles["dns-only"] = httpOnly, dnsOnly
	}, func(t *testing.T, e *env) {
		name := func(v string) acme.Identifier { return acme.Identifier{Type: acme.IdentifierDNS, Value: v} }
		ip := func(v string) acme.Identifier { return acme.Identifier{Type: acme.IdentifierIP, Value: v} }
		const reused, pending = "reused", "pending"
		cases := []struct {
			name     string
			id       acme.Identifier
			then     string // the profile of the request that could reuse the born valid authorization
			newAuthz bool   // that request is newAuthz, not newOrder
			unbind   bool   // the binding stops pre-validating in between
			want     string // reused, pending (a new authorization), or the problem type
		}{
			{"same profile", name("www.team-a.example"), "default", false, false, reused},
			{"a profile offering a method for it", name("www.team-a.example"), "http-only", false, false, reused},
			{"newAuthz, a profile offering a method for it", name("www.team-a.example"), "dns-only", true, false, reused},
			{"a wildcard, by a profile without dns-01", name("*.team-a.example"), "http-only", false, false, string(acme.ProblemRejectedIdentifier)},
			{"an IP address, by a profile without http-01 or tls-alpn-01", ip("192.0.2.7"), "dns-only", false, false, string(acme.ProblemRejectedIdentifier)},
			{"newAuthz, an IP address, by a profile without http-01 or tls-alpn-01", ip("192.0.2.7"), "dns-only", true, false, string(acme.ProblemRejectedIdentifier)},
			{"the binding no longer pre-validates", name("www.team-a.example"), "default", false, true, pending},
			{"newAuthz, the binding no longer pre-validates", name("www.team-a.example"), "dns-only", true, true, pending},
		}
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				kid := fmt.Sprintf("kid-reuse-%d", i)
				a := e.registerBound(t, kid)
				first, _ := e.newOrder(t, a, []acme.Identifier{tc.id})
				if first.Status != acme.StatusReady {
					t.Fatalf("the pre-validated order is %s, want ready", first.Status)
				}
				born := first.Authorizations[0]
				if tc.unbind {
					// No command changes a bound key; an operator may in
					// the database, and newOrder reads the binding each time.
					e.exec(t, "UPDATE eab_keys SET prevalidated = $1 WHERE id = $2", false, kid)
				}
				var r *response
				if tc.newAuthz {
					r = e.post(t, a, e.base+"/acme/new-authz", map[string]any{"identifier": tc.id, "profile": tc.then})
				} else {
					r = e.post(t, a, e.base+"/acme/new-order", map[string]any{"identifiers": []acme.Identifier{tc.id}, "profile": tc.then})
				}
				switch tc.want {
				case reused, pending:
					var got, loc = born, r.header.Get("Location")
					var status acme.Status
					if tc.newAuthz {
						var az authzJSON
						r.json(t, &az)
						got, status = loc, az.Status
					} else {
						wantStatus(t, r, http.StatusCreated)
						var o orderJSON
						r.json(t, &o)
						got, status = o.Authorizations[0], o.Status
					}
					if tc.want == reused && (got != born || (!tc.newAuthz && status != acme.StatusReady) || (tc.newAuthz && status != acme.StatusValid)) {
						t.Errorf("%s: authorization %s, %s; want the born valid %s reused", tc.then, got, status, born)
					}
					if tc.want == pending {
						if got == born || status != acme.StatusPending {
							t.Errorf("%s: authorization %s, %s; want a new pending one, not the born valid %s", tc.then, got, status, born)
						}
						if az := e.authz(t, a, got); az.Status != acme.StatusPending || len(az.Challenges) == 0 {
							t.Errorf("the new authorization is %s with %d challenges, want pending with challenges", az.Status, len(az.Challenges))
						}
					}
				default:
					p := wantProblem(t, e, r, acme.ProblemType(tc.want), http.StatusBadRequest)
					if !strings.Contains(p.Detail, "offers no challenge type that can validate") {
						t.Errorf("detail %q does not say the profile cannot validate the name", p.Detail)
					}
				}
			})
		}
	})
}

// TestNewAuthz: without a profile that allows it, newAuthz is absent from
// the directory and refused.
func TestNewAuthz(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		a := e.register(t)
		var dir map[string]any
		e.get(t, http.MethodGet, "/directory").json(t, &dir)
		if _, ok := dir["newAuthz"]; ok {
			t.Errorf("directory offers newAuthz though no profile allows it")
		}
		r := e.post(t, a, e.base+"/acme/new-authz", map[string]any{"identifier": dnsIDs("pre.example.com")[0]})
		wantProblem(t, e, r, acme.ProblemUnauthorized, http.StatusForbidden)
	})
}

// TestNewAuthzAllowed: pre-authorization reused by a later order.
func TestNewAuthzAllowed(t *testing.T) {
	t.Parallel()
	withStores(t, func(c *protocol.Config) {
		p := c.Profiles["default"]
		p.AllowPreAuthorization = true
		c.Profiles["default"] = p
	}, func(t *testing.T, e *env) {
		a := e.register(t)
		var dir map[string]any
		e.get(t, http.MethodGet, "/directory").json(t, &dir)
		if dir["newAuthz"] != e.base+"/acme/new-authz" {
			t.Errorf("directory newAuthz = %v", dir["newAuthz"])
		}
		r := e.post(t, a, e.base+"/acme/new-authz", map[string]any{"identifier": dnsIDs("*.pre.example.com")[0]})
		wantProblem(t, e, r, acme.ProblemRejectedIdentifier, http.StatusBadRequest)
		r = e.post(t, a, e.base+"/acme/new-authz", map[string]any{"identifier": dnsIDs("x.denied.example")[0]})
		wantProblem(t, e, r, acme.ProblemRejectedIdentifier, http.StatusBadRequest)

		r = e.post(t, a, e.base+"/acme/new-authz", map[string]any{"identifier": dnsIDs("pre.example.com")[0]})
		wantStatus(t, r, http.StatusCreated)
		loc := r.header.Get("Location")
		var az authzJSON
		r.json(t, &az)
		if az.Status != acme.StatusPending || len(az.Challenges) == 0 {
			t.Fatalf("new authz: %+v", az)
		}
		wantStatus(t, e.post(t, a, az.Challenges[0].URL, map[string]any{}), http.StatusOK)
		if err := e.st.ChallengeVerdict(context.Background(), store.Verdict{ChallengeID: lastSegment(az.Challenges[0].URL), Status: acme.StatusValid}); err != nil {
			t.Fatal(err)
		}
		o, _ := e.newOrder(t, a, dnsIDs("pre.example.com"))
		if o.Status != acme.StatusReady || len(o.Authorizations) != 1 || o.Authorizations[0] != loc {
			t.Errorf("order after pre-authorization: status %s authorizations %v, want ready with %s", o.Status, o.Authorizations, loc)
		}
	})
}

// TestKeyChangeWithOrderInFlight: an order created before a key rollover
// is finished with the new key; the old key is refused.
func TestKeyChangeWithOrderInFlight(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		a := e.register(t)
		o, orderURL := e.newOrder(t, a, dnsIDs("roll.example.com"))

		next := newKey(t)
		raw, _ := json.Marshal(map[string]any{"account": a.kid, "oldKey": jose.JSONWebKey{Key: a.key.Public()}})
		url := e.base + "/acme/key-change"
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: next.alg, Key: next.key},
			&jose.SignerOptions{EmbedJWK: true, ExtraHeaders: map[jose.HeaderKey]any{"url": url}})
		if err != nil {
			t.Fatal(err)
		}
		sig, _ := signer.Sign(raw)
		wantStatus(t, e.post(t, a, url, []byte(sig.FullSerialize())), http.StatusOK)
		next.kid = a.kid

		// The old key cannot touch the order; the new key finishes it.
		wantProblem(t, e, e.post(t, a, orderURL, nil), acme.ProblemMalformed, http.StatusBadRequest)
		e.validate(t, next, o)
		leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		r := e.post(t, next, o.Finalize, map[string]any{"csr": b64(csrFor(t, leafKey, "roll.example.com"))})
		wantStatus(t, r, http.StatusOK)
		if got := e.getOrder(t, next, orderURL); got.Status != acme.StatusProcessing {
			t.Errorf("order after finalize with the new key: %s, want processing", got.Status)
		}
	})
}

// TestDeactivateWithOrdersInFlight: a deactivated account's pending orders
// become invalid and every request it signs is refused.
func TestDeactivateWithOrdersInFlight(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		a := e.register(t)
		o, orderURL := e.newOrder(t, a, dnsIDs("gone.example.com"))
		wantStatus(t, e.post(t, a, a.kid, map[string]any{"status": "deactivated"}), http.StatusOK)

		got, err := e.st.OrderByID(context.Background(), lastSegment(orderURL))
		if err != nil || got.Status != acme.StatusInvalid {
			t.Errorf("order after deactivation: %v %v, want invalid", got.Status, err)
		}
		for _, u := range []string{orderURL, o.Authorizations[0], e.base + "/acme/new-order"} {
			var payload any
			if strings.HasSuffix(u, "new-order") {
				payload = map[string]any{"identifiers": dnsIDs("gone.example.com")}
			}
			// RFC 8555 §7.3.6: 401 for a deactivated account.
			wantProblem(t, e, e.post(t, a, u, payload), acme.ProblemUnauthorized, http.StatusUnauthorized)
		}
	})
}

// TestPreValidatedNotPending: authorizations a pre-validating binding
// vouches for are born valid, never pending, so an order of such names
// does not count them against pending authorizations per account, and a
// pre-validated fleet's large order is not refused by a limit on
// validations it does not wait for. The same order under a binding that
// does not pre-validate still counts its pending ones. Before, every new
// authorization counted: three pre-validated names over a limit of two
// were refused.
func TestPreValidatedNotPending(t *testing.T) {
	t.Parallel()
	withStores(t, func(c *protocol.Config) { c.Limits.PendingAuthorizationsPerAccount = 2 }, func(t *testing.T, e *env) {
		name := func(v string) acme.Identifier { return acme.Identifier{Type: acme.IdentifierDNS, Value: v} }
		ids := []acme.Identifier{name("a.team-a.example"), name("b.team-a.example"), name("c.team-a.example")}
		cases := []struct {
			name         string
			preValidated bool
			want         int
		}{
			{"pre-validated", true, http.StatusCreated},
			{"not pre-validated", false, http.StatusTooManyRequests},
		}
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				kid := fmt.Sprintf("kid-pending-%d", i)
				a := e.registerBound(t, kid)
				e.exec(t, "UPDATE eab_keys SET prevalidated = $1 WHERE id = $2", tc.preValidated, kid)
				r := e.post(t, a, e.base+"/acme/new-order", map[string]any{"identifiers": ids})
				wantStatus(t, r, tc.want)
			})
		}
	})
}
