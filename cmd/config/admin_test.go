package config

import (
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/admin/adminconf"
)

// oidc is a valid [admin.oidc]; withOIDC is it changed by f.
var oidc = adminconf.OIDC{Issuer: "https://idp.example", ClientID: "hallmark"}

func withOIDC(f func(*adminconf.OIDC)) adminconf.OIDC {
	o := oidc
	f(&o)
	return o
}

func TestValidateAdmin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		admin   adminconf.Config
		wantKey string // "" means valid
	}{
		{"disabled", adminconf.Config{}, ""},
		{"own listener with a token file", adminconf.Config{Listen: "127.0.0.1:14090", TokenFile: "admin.token"}, ""},
		{"own listener with a token env", adminconf.Config{Listen: "127.0.0.1:14090", TokenEnv: "HALLMARK_ADMIN_TOKEN"}, ""},
		{"the public ACME listener", adminconf.Config{Listen: "127.0.0.1:14000", TokenFile: "t"}, "admin.listen"},
		{"the public CRL listener", adminconf.Config{Listen: "127.0.0.1:14080", TokenFile: "t"}, "admin.listen"},
		{"not host:port", adminconf.Config{Listen: "14090", TokenFile: "t"}, "admin.listen"},
		{"no token", adminconf.Config{Listen: "127.0.0.1:14090"}, "admin.token_file"},
		{"client certificates only", adminconf.Config{Listen: "127.0.0.1:14090", TokenOff: true, TLSCertFile: "c", TLSKeyFile: "k", ClientCAFile: "ca"}, ""},
		{"token off without a CA", adminconf.Config{Listen: "127.0.0.1:14090", TokenOff: true, TLSCertFile: "c", TLSKeyFile: "k"}, "admin.token_off"},
		{"client CA without TLS", adminconf.Config{Listen: "127.0.0.1:14090", TokenFile: "t", ClientCAFile: "ca"}, "admin.client_ca_file"},
		{"a TLS cert without its key", adminconf.Config{Listen: "127.0.0.1:14090", TokenFile: "t", TLSCertFile: "c"}, "admin.tls_key_file"},
		{"OIDC only", adminconf.Config{Listen: "127.0.0.1:14090", TokenOff: true, OIDC: oidc}, ""},
		{"OIDC with a redirect URL behind a proxy", adminconf.Config{Listen: "0.0.0.0:14090", TokenFile: "t", OIDC: withOIDC(func(o *adminconf.OIDC) { o.RedirectURL = "https://ops.example/login/oidc/callback" })}, ""},
		{"OIDC on a wildcard listener without a redirect URL", adminconf.Config{Listen: "0.0.0.0:14090", TokenFile: "t", OIDC: oidc}, "admin.oidc.redirect_url"},
		{"OIDC redirect to another path", adminconf.Config{Listen: "127.0.0.1:14090", TokenFile: "t", OIDC: withOIDC(func(o *adminconf.OIDC) { o.RedirectURL = "https://ops.example/callback" })}, "admin.oidc.redirect_url"},
		{"OIDC without a client ID", adminconf.Config{Listen: "127.0.0.1:14090", TokenFile: "t", OIDC: withOIDC(func(o *adminconf.OIDC) { o.ClientID = "" })}, "admin.oidc.client_id"},
		{"OIDC issuer over plain http elsewhere", adminconf.Config{Listen: "127.0.0.1:14090", TokenFile: "t", OIDC: withOIDC(func(o *adminconf.OIDC) { o.Issuer = "http://idp.example" })}, "admin.oidc.issuer"},
		{"OIDC issuer over http on loopback", adminconf.Config{Listen: "127.0.0.1:14090", TokenFile: "t", OIDC: withOIDC(func(o *adminconf.OIDC) { o.Issuer = "http://127.0.0.1:5556" })}, ""},
		{"OIDC issuer not a URL", adminconf.Config{Listen: "127.0.0.1:14090", TokenFile: "t", OIDC: withOIDC(func(o *adminconf.OIDC) { o.Issuer = "idp.example" })}, "admin.oidc.issuer"},
		{"OIDC scopes without openid", adminconf.Config{Listen: "127.0.0.1:14090", TokenFile: "t", OIDC: withOIDC(func(o *adminconf.OIDC) { o.Scopes = []string{"email"} })}, "admin.oidc.scopes"},
		{"OIDC keys without an issuer", adminconf.Config{Listen: "127.0.0.1:14090", TokenFile: "t", OIDC: withOIDC(func(o *adminconf.OIDC) { o.Issuer = "" })}, "admin.oidc.issuer"},
		{"token off, no CA, no OIDC", adminconf.Config{Listen: "127.0.0.1:14090", TokenOff: true}, "admin.token_off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			c.Admin = tc.admin
			c.derive()
			err := c.Validate()
			if tc.wantKey == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantKey+":") {
				t.Fatalf("Validate = %v, want an error naming %s", err, tc.wantKey)
			}
		})
	}
}
