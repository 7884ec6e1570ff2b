package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/store"
)

// TestPolicy: `hallmark policy show` prints the access policy as loaded;
// `policy explain` reads an account's external account binding from the
// database, as the frontend does, and prints every check's answer and the
// deciding rule. Usage errors exit 2, an unknown account 3.
func TestPolicy(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			c := newCA(t, d.url(t))
			if r := c.want(0, "policy", "show"); !strings.Contains(r.stdout, "no access policy") {
				t.Errorf("policy show without [access]:\n%s", r.stdout)
			}
			c.configure(`
[access]
trusted_proxies = ["10.0.0.0/8"]
[access.checks.office]
kind = "cidr"
ranges = ["192.0.2.0/24"]
[access.checks.team]
kind = "eab"
key_labels = ["team *"]
[[access.rules]]
name = "outsiders"
when = "not office"
action = "deny"
message = "office only"
[[access.rules]]
name = "unbound"
when = "not team"
action = "deny"
message = "bind your account with a team key"
`)
			show := c.want(0, "policy", "show").stdout
			for _, want := range []string{"mode: enforce", "trusted proxy (10.0.0.0/8)", "office  cidr  ranges 192.0.2.0/24",
				`outsiders  not office         deny unauthorized "office only"`, "default    (no rule matched)  allow"} {
				if !strings.Contains(show, want) {
					t.Errorf("policy show lacks %q:\n%s", want, show)
				}
			}

			ctx := context.Background()
			if _, err := c.st().EABCreate(ctx, store.EABKey{ID: "kid-a", MACKey: []byte("0123456789abcdef0123456789abcdef"), Label: "team a"},
				store.AuditEvent{Actor: "test", Action: "eab.create", Subject: "kid-a"}); err != nil {
				t.Fatal(err)
			}
			bound, err := c.st().AccountCreateBound(ctx, &store.Account{KeyJWK: []byte(`{"kty":"OKP","crv":"Ed25519","x":"` + rnd() + `"}`),
				Thumbprint: rnd(), TermsAgreed: true}, "kid-a")
			if err != nil {
				t.Fatal(err)
			}
			unbound := c.account()

			out := c.want(0, "policy", "explain", "--client-addr", "10.1.1.1", "--forwarded-for", "192.0.2.7", "--account", bound.ID).stdout
			for _, want := range []string{"client: 192.0.2.7 (forwarded by trusted proxy 10.1.1.1", "team    eab   yes", `bound with key kid-a ("team a")`,
				`decision: allow by "default"`} {
				if !strings.Contains(out, want) {
					t.Errorf("explain of the bound account lacks %q:\n%s", want, out)
				}
			}
			out = c.want(0, "policy", "explain", "--client-addr", "192.0.2.7", "--account", unbound.ID, "--identifier", "www.example.com").stdout
			if !strings.Contains(out, `decision: deny by "unbound": unauthorized "bind your account with a team key"`) {
				t.Errorf("explain of the unbound account:\n%s", out)
			}
			c.want(3, "policy", "explain", "--client-addr", "192.0.2.7", "--account", "nosuch")
			c.want(2, "policy", "explain", "--client-addr", "192.0.2.300")
			c.want(2, "policy", "explain", "--client-addr", "192.0.2.7", "--request", "new-account", "--identifier", "www.example.com")
		})
	}
}
