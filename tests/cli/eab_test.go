package cli

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/store"
)

// TestEABCreate: `hallmark eab create` prints the key id and the MAC key
// once, stores the key with its limits, and audits it in the same
// transaction; a usage error creates nothing.
func TestEABCreate(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			c := newCA(t, d.url(t))
			var out struct{ KID, HMAC string }
			c.jsonOf(&out, 0, "eab", "create", "--json", "--label", "team a", "--allow-domain", ".Team.Example", "--prevalidated")
			mac, err := base64.RawURLEncoding.DecodeString(out.HMAC)
			if !strings.HasPrefix(out.KID, "eab_") || err != nil || len(mac) != 32 {
				t.Fatalf("eab create printed kid %q hmac %q (%v)", out.KID, out.HMAC, err)
			}
			k, err := c.st().EABByID(context.Background(), out.KID)
			if err != nil || string(k.MACKey) != string(mac) || len(k.AllowedDomains) != 1 || k.AllowedDomains[0] != "team.example" || !k.PreValidated {
				t.Fatalf("stored key %+v, %v", k, err)
			}
			var found bool
			for _, ev := range c.audit() {
				found = found || (ev.Action == "eab.create" && ev.Subject == out.KID && strings.Contains(ev.Detail, `"team a"`))
			}
			if !found {
				t.Errorf("no eab.create audit event for %s: %+v", out.KID, c.audit())
			}
			// --prevalidated without a limit is refused, and nothing is made.
			if r := c.run("eab", "create", "--prevalidated"); r.code != 2 {
				t.Errorf("eab create --prevalidated without limits: exit %d, want 2\n%s", r.code, r.stderr)
			}
			var keys []struct{ KID string }
			c.jsonOf(&keys, 0, "eab", "list", "--json")
			if len(keys) != 1 {
				t.Errorf("eab list after one key and one refusal: %+v", keys)
			}
		})
	}
}

// TestEABDelete: an unused key is withdrawn (audited, and nothing can bind
// it); a key that bound an account stays, exit 4, since its limits are that
// account's; a missing key is exit 3.
func TestEABDelete(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			c := newCA(t, d.url(t))
			ctx := context.Background()
			var unused, bound struct{ KID string }
			c.jsonOf(&unused, 0, "eab", "create", "--json", "--label", "leaked")
			c.jsonOf(&bound, 0, "eab", "create", "--json", "--label", "team b", "--allow-domain", "team-b.example")
			acct, err := c.st().AccountCreateBound(ctx, &store.Account{KeyJWK: []byte(`{"kty":"OKP","crv":"Ed25519","x":"` + rnd() + `"}`), Thumbprint: rnd()}, bound.KID)
			if err != nil {
				t.Fatal(err)
			}

			if r := c.run("eab", "delete", unused.KID); r.code != 0 || !strings.Contains(r.stdout, unused.KID+" is deleted") {
				t.Fatalf("eab delete of an unused key: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			if _, err := c.st().EABByID(ctx, unused.KID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("the deleted key is still stored: %v", err)
			}
			var audited bool
			for _, ev := range c.audit() {
				audited = audited || (ev.Action == "eab.delete" && ev.Subject == unused.KID)
			}
			if !audited {
				t.Errorf("no eab.delete audit event for %s", unused.KID)
			}

			r := c.run("eab", "delete", bound.KID)
			if r.code != 4 || !strings.Contains(r.stderr, "already bound account "+acct.ID) || !strings.Contains(r.stderr, "accounts deactivate "+acct.ID) {
				t.Errorf("eab delete of a bound key: exit %d, want 4 naming the account\n%s", r.code, r.stderr)
			}
			if k, err := c.st().AccountEAB(ctx, acct.ID); err != nil || k.ID != bound.KID || len(k.AllowedDomains) != 1 {
				t.Errorf("the bound key after the refused delete: %+v, %v", k, err)
			}
			if r := c.run("eab", "delete", "eab_nosuchkey"); r.code != 3 {
				t.Errorf("eab delete of a missing key: exit %d, want 3\n%s", r.code, r.stderr)
			}
			if r := c.run("eab", "delete"); r.code != 2 {
				t.Errorf("eab delete without a kid: exit %d, want 2\n%s", r.code, r.stderr)
			}
		})
	}
}
