package protocol_test

import (
	"maps"
	"net/http"
	"testing"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/profile"
)

// TestReload: a reload switches the directory's terms and the identifier
// policy for the next request, an account and nonces from before still
// work, and a configuration New would refuse is refused by Reload with
// the running one kept.
func TestReload(t *testing.T) {
	e := newEnv(t, "sqlite", nil, nil, nil)
	a := e.register(t)
	e.newOrder(t, a, dnsIDs("www.later-denied.example"))

	next := e.cfg
	next.Server.TermsOfService = "https://hallmark.example/terms-v2"
	next.Policy.DenyDomains = append([]string{"later-denied.example"}, next.Policy.DenyDomains...)
	if err := e.srv.Reload(next, nil); err != nil {
		t.Fatal(err)
	}
	terms := func() string {
		var d struct {
			Meta struct {
				TermsOfService string `json:"termsOfService"`
			} `json:"meta"`
		}
		r := e.get(t, http.MethodGet, "/directory")
		r.json(t, &d)
		return d.Meta.TermsOfService
	}
	if got := terms(); got != next.Server.TermsOfService {
		t.Fatalf("the directory's terms after the reload: %q, want %q", got, next.Server.TermsOfService)
	}
	r := e.post(t, a, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs("www.later-denied.example")})
	if p := r.problem(t); p.Type != acme.ProblemRejectedIdentifier {
		t.Fatalf("a name the reloaded policy denies: %s, want rejectedIdentifier", p.Type)
	}

	bad := next
	bad.Server.TermsOfService = "https://hallmark.example/terms-v3"
	bad.DefaultProfile = "no-such-profile"
	if err := e.srv.Reload(bad, nil); err == nil {
		t.Fatal("a default_profile that is not a profile was reloaded")
	}
	if got := terms(); got != next.Server.TermsOfService {
		t.Fatalf("after a refused reload the terms are %q, want the running %q", got, next.Server.TermsOfService)
	}
	e.newOrder(t, a, dnsIDs("www.still-allowed.example"))
}

// TestReloadRetiresProfile: a profile a reload removes is refused by
// newOrder (invalidProfile) and its directory is gone, but an order placed
// under it before is finalized while it is Retired; without (a frontend
// started after the removal) finalize answers invalidProfile, not a 500.
func TestReloadRetiresProfile(t *testing.T) {
	for _, retired := range []bool{true, false} {
		e := newEnv(t, "sqlite", nil, nil, nil)
		a := e.register(t)
		o := e.profiledOrder(t, a, "/profile/short/new-order", map[string]any{"identifiers": dnsIDs("retired.example")})
		e.validate(t, a, o)

		next := e.cfg
		next.Profiles = maps.Clone(e.cfg.Profiles)
		delete(next.Profiles, "short")
		if retired {
			next.Retired = map[string]profile.Profile{"short": e.cfg.Profiles["short"]}
		}
		if err := e.srv.Reload(next, nil); err != nil {
			t.Fatal(err)
		}
		r := e.post(t, a, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs("again.example"), "profile": "short"})
		wantProblem(t, e, r, acme.ProblemInvalidProfile, http.StatusBadRequest)
		if r := e.get(t, http.MethodGet, "/profile/short/directory"); r.status != http.StatusNotFound {
			t.Fatalf("the removed profile's directory answers %d, want 404", r.status)
		}
		r = e.post(t, a, o.Finalize, map[string]any{"csr": b64(csrFor(t, newKey(t).key, o.Identifiers[0].Value))})
		if retired {
			wantStatus(t, r, http.StatusOK)
		} else {
			wantProblem(t, e, r, acme.ProblemInvalidProfile, http.StatusBadRequest)
		}
	}
}
