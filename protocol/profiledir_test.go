package protocol_test

import (
	"net/http"
	"testing"

	"github.com/hallmark-ca/hallmark/protocol"
	"github.com/hallmark-ca/hallmark/protocol/acme"
)

type dirJSON struct {
	NewNonce, NewAccount, NewOrder, NewAuthz string
	Meta                                     struct {
		Profiles map[string]string `json:"profiles"`
	}
}

// TestProfileDirectory: /profile/<name>/directory's newOrder and newAuthz
// select the profile without a "profile" field; another profile named in
// the payload is invalidProfile; an unknown profile is 404.
func TestProfileDirectory(t *testing.T) {
	t.Parallel()
	withStores(t, func(c *protocol.Config) {
		p := c.Profiles["short"]
		p.AllowPreAuthorization = true
		c.Profiles["short"] = p
	}, func(t *testing.T, e *env) {
		var d dirJSON
		r := e.get(t, http.MethodGet, "/profile/short/directory")
		wantStatus(t, r, http.StatusOK)
		r.json(t, &d)
		if d.NewOrder != e.base+"/profile/short/new-order" || d.NewAuthz != e.base+"/profile/short/new-authz" {
			t.Errorf("short's directory newOrder %q newAuthz %q", d.NewOrder, d.NewAuthz)
		}
		if d.NewNonce != e.base+"/acme/new-nonce" || d.NewAccount != e.base+"/acme/new-account" {
			t.Errorf("short's directory newNonce %q newAccount %q, want the shared ones", d.NewNonce, d.NewAccount)
		}
		if len(d.Meta.Profiles) != 1 || d.Meta.Profiles["short"] != e.cfg.Profiles["short"].Description {
			t.Errorf("short's directory meta.profiles = %v, want only short", d.Meta.Profiles)
		}
		d = dirJSON{}
		e.get(t, http.MethodGet, "/profile/default/directory").json(t, &d)
		if d.NewOrder != e.base+"/profile/default/new-order" || d.NewAuthz != "" {
			t.Errorf("default's directory newOrder %q newAuthz %q", d.NewOrder, d.NewAuthz)
		}

		wantProblem(t, e, e.get(t, http.MethodGet, "/profile/nope/directory"), acme.ProblemMalformed, http.StatusNotFound)
		a := e.register(t)
		r = e.post(t, a, e.base+"/profile/nope/new-order", map[string]any{"identifiers": dnsIDs("a.example.com")})
		wantProblem(t, e, r, acme.ProblemMalformed, http.StatusNotFound)

		// Twice: the second may take the folded path (fold.go).
		for _, name := range []string{"a.example.com", "b.example.com"} {
			o := e.profiledOrder(t, a, "/profile/short/new-order", map[string]any{"identifiers": dnsIDs(name)})
			if o.Profile != "short" {
				t.Errorf("order for %s at short's newOrder has profile %q", name, o.Profile)
			}
		}
		o := e.profiledOrder(t, a, "/profile/short/new-order", map[string]any{"identifiers": dnsIDs("c.example.com"), "profile": "short"})
		if o.Profile != "short" {
			t.Errorf("order naming its own profile has profile %q", o.Profile)
		}
		r = e.post(t, a, e.base+"/profile/short/new-order", map[string]any{"identifiers": dnsIDs("d.example.com"), "profile": "default"})
		wantProblem(t, e, r, acme.ProblemInvalidProfile, http.StatusBadRequest)
		if o, _ := e.newOrder(t, a, dnsIDs("e.example.com")); o.Profile != "default" {
			t.Errorf("order at /acme/new-order has profile %q, want the default", o.Profile)
		}

		r = e.post(t, a, e.base+"/profile/short/new-authz", map[string]any{"identifier": dnsIDs("pre.example.com")[0]})
		wantStatus(t, r, http.StatusCreated)
		r = e.post(t, a, e.base+"/profile/default/new-authz", map[string]any{"identifier": dnsIDs("pre2.example.com")[0]})
		wantProblem(t, e, r, acme.ProblemUnauthorized, http.StatusForbidden)
	})
}

func (e *env) profiledOrder(t *testing.T, a *account, path string, payload map[string]any) orderJSON {
	t.Helper()
	r := e.post(t, a, e.base+path, payload)
	wantStatus(t, r, http.StatusCreated)
	var o orderJSON
	r.json(t, &o)
	return o
}
