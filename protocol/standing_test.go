package protocol_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/hallmark-ca/hallmark/protocol"
	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// TestStandingChallenges: a profile that lists dns-persist-01 and
// dns-account-01 offers them, for a wildcard too (never http-01 there),
// and dns-persist-01 (not dns-account-01) for an IP address;
// dns-persist-01's challenge carries the CAA identities as its
// issuer-domain-names, normalized, and no token. The built-in profile
// offers neither. The directory advertises what draft -02 asks for
// pre-provisioning a record.
func TestStandingChallenges(t *testing.T) {
	withStores(t, func(c *protocol.Config) {
		c.Server.CAAIdentities = []string{"Hallmark.Example.", "ca.example"}
		p := c.Profiles["short"]
		p.Challenges = []string{"http-01", "dns-account-01", "dns-persist-01"}
		c.Profiles["short"] = p
	}, func(t *testing.T, e *env) {
		a := e.register(t)
		ids := append(dnsIDs("a.example", "*.b.example"), acme.Identifier{Type: acme.IdentifierIP, Value: "192.0.2.7"})
		r := e.post(t, a, e.base+"/acme/new-order", map[string]any{"identifiers": ids, "profile": "short"})
		wantStatus(t, r, http.StatusCreated)
		var o orderJSON
		r.json(t, &o)
		want := map[string][]string{
			"a.example": {"http-01", "dns-account-01", "dns-persist-01"},
			"b.example": {"dns-account-01", "dns-persist-01"},
			"192.0.2.7": {"http-01", "dns-persist-01"},
		}
		for _, u := range o.Authorizations {
			ra := e.post(t, a, u, nil)
			wantStatus(t, ra, http.StatusOK)
			var az struct {
				Identifier struct{ Value string }
				Challenges []map[string]json.RawMessage
			}
			ra.json(t, &az)
			var types []string
			for _, ch := range az.Challenges {
				var typ string
				_ = json.Unmarshal(ch["type"], &typ)
				types = append(types, typ)
				if typ != "dns-persist-01" {
					if _, ok := ch["token"]; !ok || ch["issuer-domain-names"] != nil || ch["accounturi"] != nil {
						t.Errorf("%s challenge %s: want a token and no issuer-domain-names or accounturi", typ, ch)
					}
					continue
				}
				var names, names02 []string
				_ = json.Unmarshal(ch["issuer-domain-names"], &names)
				_ = json.Unmarshal(ch["issuerDomainNames"], &names02)
				if _, ok := ch["token"]; ok || !slices.Equal(names, []string{"hallmark.example", "ca.example"}) || !slices.Equal(names02, names) {
					t.Errorf("dns-persist-01 challenge %s: want no token and issuer-domain-names and issuerDomainNames [hallmark.example ca.example]", ch)
				}
				var uri string
				_ = json.Unmarshal(ch["accounturi"], &uri)
				if uri != a.kid {
					t.Errorf("dns-persist-01 challenge %s: accounturi %q, want the account's URL %q (draft-ietf-acme-dns-persist-01 §3.1)", ch, uri, a.kid)
				}
			}
			if !slices.Equal(types, want[az.Identifier.Value]) {
				t.Errorf("%s offers %v, want %v", az.Identifier.Value, types, want[az.Identifier.Value])
			}
		}
		var dir struct {
			Meta struct {
				IssuerDomainNames []string
				AccountHashPrefix string
			}
		}
		e.get(t, http.MethodGet, "/directory").json(t, &dir)
		if !slices.Equal(dir.Meta.IssuerDomainNames, []string{"hallmark.example", "ca.example"}) || dir.Meta.AccountHashPrefix != e.base+"/acme/account-hash/" {
			t.Errorf("directory meta %+v, want the issuer domain names and %s/acme/account-hash/", dir.Meta, e.base)
		}
		o2, _ := e.newOrder(t, a, dnsIDs("c.example"))
		az := e.authz(t, a, o2.Authorizations[0])
		for _, ch := range az.Challenges {
			if ch.Type == "dns-persist-01" || ch.Type == "dns-account-01" {
				t.Errorf("the built-in profile offers %s", ch.Type)
			}
		}
	})
}
