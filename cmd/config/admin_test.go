package config

import (
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/admin"
)

func TestValidateAdmin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		admin   admin.Config
		wantKey string // "" means valid
	}{
		{"disabled", admin.Config{}, ""},
		{"own listener with a token file", admin.Config{Listen: "127.0.0.1:14090", TokenFile: "admin.token"}, ""},
		{"own listener with a token env", admin.Config{Listen: "127.0.0.1:14090", TokenEnv: "HALLMARK_ADMIN_TOKEN"}, ""},
		{"the public ACME listener", admin.Config{Listen: "127.0.0.1:14000", TokenFile: "t"}, "admin.listen"},
		{"the public CRL listener", admin.Config{Listen: "127.0.0.1:14080", TokenFile: "t"}, "admin.listen"},
		{"not host:port", admin.Config{Listen: "14090", TokenFile: "t"}, "admin.listen"},
		{"no token", admin.Config{Listen: "127.0.0.1:14090"}, "admin.token_file"},
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
