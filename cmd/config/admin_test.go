package config

import (
	"strings"
	"testing"
)

func TestValidateAdmin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		admin   Admin
		wantKey string // "" means valid
	}{
		{"disabled", Admin{}, ""},
		{"own listener with a token file", Admin{Listen: "127.0.0.1:14090", TokenFile: "admin.token"}, ""},
		{"own listener with a token env", Admin{Listen: "127.0.0.1:14090", TokenEnv: "HALLMARK_ADMIN_TOKEN"}, ""},
		{"the public ACME listener", Admin{Listen: "127.0.0.1:14000", TokenFile: "t"}, "admin.listen"},
		{"the public CRL listener", Admin{Listen: "127.0.0.1:14080", TokenFile: "t"}, "admin.listen"},
		{"not host:port", Admin{Listen: "14090", TokenFile: "t"}, "admin.listen"},
		{"no token", Admin{Listen: "127.0.0.1:14090"}, "admin.token_file"},
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
