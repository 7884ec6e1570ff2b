package config

import (
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/admin/adminconf"
)

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
