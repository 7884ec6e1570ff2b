package config_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/admin/adminconf"
)

// TestAdminOIDCFromFile: [admin.oidc] decodes strictly from the file, its
// secret file is relative to the file's directory, the redirect URL is
// derived from admin.listen when not given, and a misspelled key is
// refused by name.
func TestAdminOIDCFromFile(t *testing.T) {
	t.Parallel()
	c, err := load(t, `
[admin]
listen = "127.0.0.1:14090"
token_off = true

[admin.oidc]
issuer = "https://idp.example/realms/ops"
client_id = "hallmark"
client_secret_file = "oidc.secret"
scopes = ["openid", "email"]
name_claim = "preferred_username"
provider_name = "Ops SSO"
`)
	if err != nil {
		t.Fatal(err)
	}
	o := c.Admin.OIDC
	if !o.On() || o.ClientID != "hallmark" || !filepath.IsAbs(o.ClientSecretFile) || filepath.Base(o.ClientSecretFile) != "oidc.secret" ||
		!slices.Equal(o.ScopeList(), []string{"openid", "email"}) || o.NameClaim != "preferred_username" || o.Label() != "Ops SSO" {
		t.Fatalf("[admin.oidc] = %+v", o)
	}
	if got, want := c.Admin.RedirectURL(), "http://127.0.0.1:14090"+adminconf.CallbackPath; got != want {
		t.Fatalf("derived redirect URL %q, want %q", got, want)
	}

	_, err = load(t, `
[admin]
listen = "127.0.0.1:14090"
token_file = "t"

[admin.oidc]
issuer = "https://idp.example"
client_id = "hallmark"
client_secret = "inline"
`)
	if err == nil || !strings.Contains(err.Error(), "admin.oidc.client_secret") {
		t.Fatalf("an unknown [admin.oidc] key: %v, want it refused by name", err)
	}
}

// TestAdminOIDCDefaults: the default scopes and label, and the derived
// callback on a TLS listener.
func TestAdminOIDCDefaults(t *testing.T) {
	t.Parallel()
	c := adminconf.Config{Listen: "ops.internal:8443", TLSCertFile: "c", OIDC: adminconf.OIDC{Issuer: "https://login.example/tenant", ClientID: "x"}}
	if got := c.RedirectURL(); got != "https://ops.internal:8443/login/oidc/callback" {
		t.Fatalf("redirect URL %q", got)
	}
	if !slices.Equal(c.OIDC.ScopeList(), adminconf.DefaultScopes) || c.OIDC.Label() != "login.example" {
		t.Fatalf("defaults: scopes %v, label %q", c.OIDC.ScopeList(), c.OIDC.Label())
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "admin.token_file") {
		t.Fatalf("OIDC beside no token and the token on: %v, want admin.token_file", err)
	}
}
