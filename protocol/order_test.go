package protocol_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/storetest"
)

func challengeTypes(az authzJSON) string {
	var ts []string
	for _, c := range az.Challenges {
		ts = append(ts, c.Type)
	}
	sort.Strings(ts)
	return strings.Join(ts, ",")
}

func TestNewOrder(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		a := e.register(t)
		ids := []acme.Identifier{
			{Type: acme.IdentifierDNS, Value: "www.order.example"},
			{Type: acme.IdentifierDNS, Value: "*.order.example"},
			{Type: acme.IdentifierIP, Value: "192.0.2.7"},
		}
		r := e.post(t, a, e.base+"/acme/new-order", map[string]any{"identifiers": ids})
		wantStatus(t, r, http.StatusCreated)
		loc := r.header.Get("Location")
		if !strings.HasPrefix(loc, e.base+"/acme/order/") {
			t.Errorf("Location = %q", loc)
		}
		var o orderJSON
		r.json(t, &o)
		if o.Status != acme.StatusPending || len(o.Authorizations) != 3 || o.Finalize != loc+"/finalize" || o.Profile != "default" {
			t.Fatalf("order = %+v", o)
		}
		if exp, err := time.Parse(time.RFC3339, o.Expires); err != nil || time.Until(exp) < time.Hour {
			t.Errorf("expires = %q", o.Expires)
		}
		want := map[string]string{
			"dns:www.order.example": "dns-01,http-01,tls-alpn-01",
			"dns:order.example*":    "dns-01", // wildcard: dns-01 only
			"ip:192.0.2.7":          "http-01,tls-alpn-01",
		}
		for _, u := range o.Authorizations {
			az := e.authz(t, a, u)
			key := az.Identifier.String()
			if az.Wildcard {
				key += "*"
			}
			if got := challengeTypes(az); got != want[key] {
				t.Errorf("authz %s challenges = %s, want %s", key, got, want[key])
			}
			if az.Status != acme.StatusPending {
				t.Errorf("authz %s status %s", key, az.Status)
			}
			for _, c := range az.Challenges {
				if c.Status != acme.StatusPending || len(c.Token) < 22 || !strings.HasPrefix(c.URL, e.base+"/acme/chall/") {
					t.Errorf("challenge %+v", c)
				}
			}
		}

		cases := []struct {
			name    string
			payload any
			typ     acme.ProblemType
		}{
			{"unknown profile", map[string]any{"identifiers": dnsIDs("a.example"), "profile": "gold"}, acme.ProblemInvalidProfile},
			{"no identifiers", map[string]any{"identifiers": []acme.Identifier{}}, acme.ProblemMalformed},
			{"validity on a profile that refuses it", map[string]any{"identifiers": dnsIDs("a.example"), "notAfter": time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)}, acme.ProblemMalformed},
			{"validity longer than the profile", map[string]any{"identifiers": dnsIDs("a.example"), "profile": "short", "notAfter": time.Now().Add(100 * time.Hour).UTC().Format(time.RFC3339)}, acme.ProblemMalformed},
			// notAfter is inclusive, as the signer counts it: a window of
			// exactly the profile's 48 hours is 48 h + 1 s of validity, and
			// the signer would fail the order after finalize.
			{"validity of the profile's hours counting both ends", map[string]any{"identifiers": dnsIDs("a.example"), "profile": "short",
				"notBefore": time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "notAfter": time.Now().Add(49 * time.Hour).UTC().Format(time.RFC3339)}, acme.ProblemMalformed},
			{"denied domain", map[string]any{"identifiers": dnsIDs("www.denied.example")}, acme.ProblemRejectedIdentifier},
			{"bad name", map[string]any{"identifiers": dnsIDs("bad..name.example")}, acme.ProblemMalformed},
		}
		for _, c := range cases {
			r := e.post(t, a, e.base+"/acme/new-order", c.payload)
			t.Run(c.name, func(t *testing.T) { wantProblem(t, e, r, c.typ, 400) })
		}

		// A profile that allows it takes notBefore/notAfter.
		na := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)
		r = e.post(t, a, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs("short.example"), "profile": "short", "notAfter": na.Format(time.RFC3339)})
		wantStatus(t, r, http.StatusCreated)
		r.json(t, &o)
		if o.Profile != "short" || o.NotAfter != na.Format(time.RFC3339) {
			t.Errorf("short order profile %q notAfter %q", o.Profile, o.NotAfter)
		}

		// Another account may not read the order.
		b := e.register(t)
		r = e.post(t, b, loc, nil)
		wantProblem(t, e, r, acme.ProblemUnauthorized, 403)
		r = e.get(t, http.MethodGet, strings.TrimPrefix(loc, e.base))
		wantProblem(t, e, r, acme.ProblemMalformed, http.StatusMethodNotAllowed)
		if r.header.Get("Allow") != "POST" {
			t.Errorf("Allow = %q", r.header.Get("Allow"))
		}
		r = e.post(t, a, e.base+"/acme/order/nope", nil)
		wantProblem(t, e, r, acme.ProblemMalformed, http.StatusNotFound)
	})
}

func TestAuthzReuse(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		a := e.register(t)
		o, loc := e.newOrder(t, a, dnsIDs("reuse.example"))
		e.validate(t, a, o)
		if got := e.getOrder(t, a, loc); got.Status != acme.StatusReady {
			t.Fatalf("order after validation: %s", got.Status)
		}
		o2, _ := e.newOrder(t, a, dnsIDs("reuse.example"))
		if o2.Status != acme.StatusReady || len(o2.Authorizations) != 1 || o2.Authorizations[0] != o.Authorizations[0] {
			t.Errorf("second order %+v did not reuse authz %s", o2, o.Authorizations[0])
		}
		// Another account does not get it.
		b := e.register(t)
		o3, _ := e.newOrder(t, b, dnsIDs("reuse.example"))
		if o3.Status != acme.StatusPending || o3.Authorizations[0] == o.Authorizations[0] {
			t.Errorf("another account's order %+v reused the authz", o3)
		}
	})
}

// deactivatingReuse is a real store that, while armed, deactivates every
// authorization an order is to reuse just before writing the order: the
// deactivation lands between newOrder's choice of authorizations (read
// ahead with its nonce, or by AuthzsReusable) and its OrderCreate.
type deactivatingReuse struct {
	store.Store
	armed *atomic.Bool
}

func (d deactivatingReuse) OrderCreate(ctx context.Context, u store.SignedUse, o store.NewOrder) (*store.Order, error) {
	if d.armed.Load() {
		for _, a := range o.Authzs {
			if a.ID != "" {
				if _, err := d.Store.AuthzDeactivate(ctx, a.ID); err != nil {
					return nil, err
				}
			}
		}
	}
	return d.Store.OrderCreate(ctx, u, o)
}

// TestAuthzReuseRaceGetsFreshAuthz: an authorization chosen for reuse that
// is deactivated before the order is written is not reused; the order
// gets a fresh one, pending, and the client never sees the race. Before,
// the order was written pending on the deactivated authorization and could
// never become ready.
func TestAuthzReuseRaceGetsFreshAuthz(t *testing.T) {
	t.Parallel()
	var armed atomic.Bool
	wrap := func(s store.Store) store.Store { return deactivatingReuse{s, &armed} }
	withWrappedStores(t, nil, wrap, nil, func(t *testing.T, e *env) {
		a := e.register(t)
		o, _ := e.newOrder(t, a, dnsIDs("race.reuse.example"))
		e.validate(t, a, o)
		armed.Store(true)
		o2, _ := e.newOrder(t, a, dnsIDs("race.reuse.example"))
		armed.Store(false)
		if len(o2.Authorizations) != 1 || o2.Authorizations[0] == o.Authorizations[0] || o2.Status != acme.StatusPending {
			t.Fatalf("the order after its authorization was deactivated mid-newOrder: %+v; want a fresh pending authorization, not %s", o2, o.Authorizations[0])
		}
		if got := e.authz(t, a, o2.Authorizations[0]); got.Status != acme.StatusPending {
			t.Errorf("the fresh authorization is %s, want pending", got.Status)
		}
	})
}

func TestAuthz(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		a := e.register(t)
		b := e.register(t)
		o, loc := e.newOrder(t, a, dnsIDs("authz.example"))
		u := o.Authorizations[0]
		az := e.authz(t, a, u)
		if az.Identifier.Value != "authz.example" || az.Status != acme.StatusPending {
			t.Errorf("authz = %+v", az)
		}
		wantProblem(t, e, e.post(t, b, u, nil), acme.ProblemUnauthorized, 403)
		wantProblem(t, e, e.post(t, b, u, map[string]any{"status": "deactivated"}), acme.ProblemUnauthorized, 403)
		wantProblem(t, e, e.post(t, a, u, map[string]any{"status": "valid"}), acme.ProblemMalformed, 400)
		r := e.get(t, http.MethodGet, strings.TrimPrefix(u, e.base))
		wantProblem(t, e, r, acme.ProblemMalformed, http.StatusMethodNotAllowed)

		r = e.post(t, a, u, map[string]any{"status": "deactivated"})
		wantStatus(t, r, http.StatusOK)
		r.json(t, &az)
		if az.Status != acme.StatusDeactivated {
			t.Errorf("status after deactivate = %s", az.Status)
		}
		if got := e.getOrder(t, a, loc); got.Status != acme.StatusInvalid {
			t.Errorf("order after its authz was deactivated: %s", got.Status)
		}
		// Its challenges can no longer be answered.
		wantProblem(t, e, e.post(t, a, az.Challenges[0].URL, map[string]any{}), acme.ProblemMalformed, 400)
	})
}

func TestChallenge(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		a := e.register(t)
		b := e.register(t)
		o, _ := e.newOrder(t, a, dnsIDs("chall.example"))
		az := e.authz(t, a, o.Authorizations[0])
		ch := az.Challenges[0]

		// POST-as-GET reads without claiming.
		r := e.post(t, a, ch.URL, nil)
		wantStatus(t, r, http.StatusOK)
		var c challJSON
		r.json(t, &c)
		if c.Status != acme.StatusPending || r.header.Get("Retry-After") != "" {
			t.Errorf("POST-as-GET challenge: %+v Retry-After %q", c, r.header.Get("Retry-After"))
		}
		if n := e.jobCount(t, "challenge_validate"); n != 0 {
			t.Errorf("%d challenge_validate jobs after a read", n)
		}
		wantProblem(t, e, e.post(t, b, ch.URL, map[string]any{}), acme.ProblemUnauthorized, 403)
		wantProblem(t, e, e.post(t, a, ch.URL, []byte(`"go"`)), acme.ProblemMalformed, 400)

		r = e.post(t, a, ch.URL, map[string]any{})
		wantStatus(t, r, http.StatusOK)
		r.json(t, &c)
		if c.Status != acme.StatusProcessing {
			t.Errorf("challenge after POST: %s", c.Status)
		}
		if ra := r.header.Get("Retry-After"); ra != "2" {
			t.Errorf("Retry-After = %q, want 2", ra)
		}
		if up := r.links("up"); len(up) != 1 || up[0] != o.Authorizations[0] {
			t.Errorf(`Link rel="up" = %v, want %s`, up, o.Authorizations[0])
		}
		if n := e.jobCount(t, "challenge_validate"); n != 1 {
			t.Errorf("%d challenge_validate jobs, want 1", n)
		}
		// A second POST answers the current state and queues nothing more.
		r = e.post(t, a, ch.URL, map[string]any{})
		wantStatus(t, r, http.StatusOK)
		r.json(t, &c)
		if c.Status != acme.StatusProcessing {
			t.Errorf("challenge after second POST: %s", c.Status)
		}
		if n := e.jobCount(t, "challenge_validate"); n != 1 {
			t.Errorf("%d challenge_validate jobs after a repeated POST, want 1", n)
		}
		wantProblem(t, e, e.post(t, a, e.base+"/acme/chall/nope", nil), acme.ProblemMalformed, http.StatusNotFound)
	})
}

func TestFinalize(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		a := e.register(t)
		b := e.register(t)
		names := []string{"fin.example", "www.fin.example"}
		o, loc := e.newOrder(t, a, dnsIDs(names...))
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		good := map[string]any{"csr": b64(csrFor(t, key, names...))}

		p := wantProblem(t, e, e.post(t, a, o.Finalize, good), acme.ProblemOrderNotReady, 403)
		if !strings.Contains(p.Detail, "pending") {
			t.Errorf("orderNotReady detail does not name the state: %q", p.Detail)
		}
		e.validate(t, a, o)

		wantProblem(t, e, e.post(t, b, o.Finalize, good), acme.ProblemUnauthorized, 403)
		wantProblem(t, e, e.post(t, a, o.Finalize, map[string]any{"csr": b64(csrFor(t, key, "fin.example"))}), acme.ProblemBadCSR, 400)
		wantProblem(t, e, e.post(t, a, o.Finalize, map[string]any{"csr": b64(csrFor(t, key, append(names, "extra.example")...))}), acme.ProblemBadCSR, 400)
		wantProblem(t, e, e.post(t, a, o.Finalize, map[string]any{"csr": "!!!"}), acme.ProblemMalformed, 400)
		wantProblem(t, e, e.post(t, a, o.Finalize, map[string]any{"csr": b64([]byte("not a csr"))}), acme.ProblemBadCSR, 400)
		if n := e.jobCount(t, "signer_issue"); n != 0 {
			t.Fatalf("%d signer_issue jobs after refused finalizes", n)
		}

		r := e.post(t, a, o.Finalize, good)
		wantStatus(t, r, http.StatusOK)
		var got orderJSON
		r.json(t, &got)
		if got.Status != acme.StatusProcessing || r.header.Get("Retry-After") != "2" || r.header.Get("Location") != loc {
			t.Errorf("finalize: status %s Retry-After %q Location %q", got.Status, r.header.Get("Retry-After"), r.header.Get("Location"))
		}
		if n := e.jobCount(t, "signer_issue"); n != 1 {
			t.Errorf("%d signer_issue jobs, want 1", n)
		}
		r = e.post(t, a, loc, nil)
		wantStatus(t, r, http.StatusOK)
		if r.header.Get("Retry-After") != "2" {
			t.Errorf("processing order GET has Retry-After %q", r.header.Get("Retry-After"))
		}
		p = wantProblem(t, e, e.post(t, a, o.Finalize, good), acme.ProblemOrderNotReady, 403)
		if !strings.Contains(p.Detail, "processing") {
			t.Errorf("second finalize detail: %q", p.Detail)
		}
	})
}

// TestRequestsNeverWaitForWork: with no worker running, a challenge POST and
// a finalize answer at once with "processing"; the work is a job row.
func TestRequestsNeverWaitForWork(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		a := e.register(t)
		o, loc := e.newOrder(t, a, dnsIDs("prompt.example"))
		az := e.authz(t, a, o.Authorizations[0])
		ch := az.Challenges[0]

		start := time.Now()
		r := e.post(t, a, ch.URL, map[string]any{})
		took := time.Since(start)
		wantStatus(t, r, http.StatusOK)
		t.Logf("%s: challenge POST answered in %v with no worker running", e.kind, took)
		cur, err := storetest.ChallengeByID(context.Background(), e.st, lastSegment(ch.URL))
		if err != nil || cur.Status != acme.StatusProcessing {
			t.Fatalf("challenge in store: %v %v", cur, err)
		}
		if n := e.jobCount(t, "challenge_validate"); n != 1 {
			t.Errorf("%d challenge_validate jobs, want 1", n)
		}

		if err := e.st.ChallengeVerdict(context.Background(), store.Verdict{ChallengeID: cur.ID, Status: acme.StatusValid}); err != nil {
			t.Fatal(err)
		}
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		start = time.Now()
		r = e.post(t, a, o.Finalize, map[string]any{"csr": b64(csrFor(t, key, "prompt.example"))})
		took = time.Since(start)
		wantStatus(t, r, http.StatusOK)
		t.Logf("%s: finalize answered in %v with no worker running", e.kind, took)
		ord, err := e.st.OrderByID(context.Background(), lastSegment(loc))
		if err != nil || ord.Status != acme.StatusProcessing {
			t.Fatalf("order in store: %v %v", ord, err)
		}
		if n := e.jobCount(t, "signer_issue"); n != 1 {
			t.Errorf("%d signer_issue jobs, want 1", n)
		}
	})
}

// TestNewOrderRequestedNotBefore: a profile that honours notBefore refuses
// one further in the past than the signer backdates a certificate
// (profile.MaxBackdate), which it would otherwise move (RFC 8555 §7.4: the
// server MUST NOT issue other contents than requested, and MUST say when
// it cannot fulfil the request); one within the backdate, or ahead, is
// taken and echoed.
func TestNewOrderRequestedNotBefore(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		a := e.register(t)
		now := time.Now().UTC().Truncate(time.Second)
		for _, tc := range []struct {
			name   string
			nb     time.Time
			refuse bool
		}{
			{"ten days ago", now.Add(-10 * 24 * time.Hour), true},
			{"two minutes ago", now.Add(-2 * time.Minute), true},
			{"ten seconds ago", now.Add(-10 * time.Second), false},
			{"in an hour", now.Add(time.Hour), false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				nb := tc.nb.Format(time.RFC3339)
				r := e.post(t, a, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs("backdate.example"), "profile": "short", "notBefore": nb})
				if !tc.refuse {
					wantStatus(t, r, http.StatusCreated)
					var o orderJSON
					r.json(t, &o)
					if o.NotBefore != nb {
						t.Errorf("order notBefore %q, want %q", o.NotBefore, nb)
					}
					return
				}
				p := wantProblem(t, e, r, acme.ProblemMalformed, http.StatusBadRequest)
				want := "notBefore " + nb + " is in the past: this CA backdates a certificate by at most 1m0s when the order is placed; leave notBefore out, or ask for a time from now on"
				if p.Detail != want || p.Identifier != nil || len(p.Subproblems) != 0 {
					t.Errorf("problem %+v\nwant detail %q", p, want)
				}
			})
		}
	})
}

// validateBy answers authorization u's challenge of type typ and records
// the worker's valid verdict on it.
func (e *env) validateBy(t *testing.T, a *account, u, typ string) {
	t.Helper()
	for _, c := range e.authz(t, a, u).Challenges {
		if c.Type == typ {
			wantStatus(t, e.post(t, a, c.URL, map[string]any{}), http.StatusOK)
			if err := e.st.ChallengeVerdict(context.Background(), store.Verdict{ChallengeID: lastSegment(c.URL), Status: acme.StatusValid}); err != nil {
				t.Fatalf("ChallengeVerdict: %v", err)
			}
			return
		}
	}
	t.Fatalf("authorization %s has no %s challenge", u, typ)
}

// TestAuthzReuseByProfile: a valid authorization is reused, by newOrder
// and by newAuthz, only for a profile that offers the challenge type that
// validated it. One validated by http-01 does not make an order of a
// profile offering only dns-01 ready: the order gets a fresh authorization
// with the profile's own challenges. (Pending authorizations are never
// reused, whatever the profile.)
func TestAuthzReuseByProfile(t *testing.T) {
	t.Parallel()
	dnsOnly := func(c *protocol.Config) {
		def := c.Profiles["default"]
		def.AllowPreAuthorization = true
		c.Profiles["default"] = def
		p := def
		p.Description, p.Challenges = "dns-01 only", []string{"dns-01"}
		c.Profiles["dnsonly"] = p
	}
	withStores(t, dnsOnly, func(t *testing.T, e *env) {
		for _, tc := range []struct {
			name      string
			validated string // the challenge type that validated the first authorization, under the default profile
			profile   string // the profile of the second request
			newAuthz  bool   // the second request is newAuthz, not newOrder
			reused    bool
		}{
			{"http-01 then a dns-01-only order", "http-01", "dnsonly", false, false},
			{"dns-01 then a dns-01-only order", "dns-01", "dnsonly", false, true},
			{"http-01 then an order of the same profile", "http-01", "default", false, true},
			{"http-01 then a dns-01-only newAuthz", "http-01", "dnsonly", true, false},
			{"dns-01 then a dns-01-only newAuthz", "dns-01", "dnsonly", true, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				a := e.register(t)
				name := strings.ReplaceAll(strings.ReplaceAll(tc.name, " ", "-"), "-0", "0") + ".example"
				o, _ := e.newOrder(t, a, dnsIDs(name))
				e.validateBy(t, a, o.Authorizations[0], tc.validated)
				first := o.Authorizations[0]

				var second, status string
				if tc.newAuthz {
					r := e.post(t, a, e.base+"/acme/new-authz", map[string]any{"identifier": dnsIDs(name)[0], "profile": tc.profile})
					wantStatus(t, r, map[bool]int{true: http.StatusOK, false: http.StatusCreated}[tc.reused])
					second = r.header.Get("Location")
				} else {
					r := e.post(t, a, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs(name), "profile": tc.profile})
					wantStatus(t, r, http.StatusCreated)
					var o2 orderJSON
					r.json(t, &o2)
					second, status = o2.Authorizations[0], string(o2.Status)
				}
				az := e.authz(t, a, second)
				if tc.reused {
					if second != first || az.Status != acme.StatusValid || (!tc.newAuthz && status != string(acme.StatusReady)) {
						t.Errorf("got authorization %s (%s), order %q; want %s reused, the order ready", second, az.Status, status, first)
					}
					return
				}
				want := "dns-01"
				if second == first || az.Status != acme.StatusPending || challengeTypes(az) != want || (!tc.newAuthz && status != string(acme.StatusPending)) {
					t.Errorf("got authorization %s (%s, challenges %s), order %q; want a fresh pending one offering %s, not %s (validated by %s)",
						second, az.Status, challengeTypes(az), status, want, first, tc.validated)
				}
			})
		}
	})
}
