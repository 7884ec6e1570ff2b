package cli

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// TestEABCreate: `hallmark eab create` prints the key id and the MAC key
// once, stores the key with its limits, and audits it in the same
// transaction; a usage error creates nothing.
func TestEABCreate(t *testing.T) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			url := testdb.SQLite(t)
			if dialect == "postgres" {
				url = testdb.Postgres(t)
			}
			c := newCA(t, url)
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
