package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/cmd/config"
)

const hsmProfile = `
[profiles.hsm]
description = "on the HSM"
backend = "pkcs11"
signer = "token"
validity_hours = 72
challenges = ["dns-01"]
`

func load(t *testing.T, body string) (config.Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hallmark.toml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return config.Load(path)
}

// tokenBackend is a valid pkcs11 backend, [backends.token].
const tokenBackend = `
[backends.token]
type = "pkcs11"
module = "/usr/lib/softhsm/libsofthsm2.so"
token_label = "ca"
pin_env = "HSM_PIN"
key_label = "issuer"
cert = "hsm.pem"
`

func TestBackendsConfig(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body string
		wantErr    []string // each must appear; none means valid
	}{
		{"pkcs11 valid", hsmProfile + tokenBackend, nil},
		{"pkcs11 valid, a short job timeout", hsmProfile + `
[worker]
job_timeout_ms = 8000
rescue_after_ms = 15000

[challenge]
timeout_ms = 7000
` + tokenBackend, nil},
		{"pkcs11 timeout beyond the job's", hsmProfile + tokenBackend + "timeout_ms = 60000\n", []string{"backends.token.timeout_ms: must be shorter than worker.job_timeout_ms"}},
		{"pkcs11 missing pieces", hsmProfile + `
[backends.token]
type = "pkcs11"
pin_env = "A"
pin_file = "b"
`, []string{"backends.token.module", "backends.token.token_label", "backends.token.pin_env: set exactly one", "backends.token.key_label", "backends.token.cert"}},
		{"a field of another type", hsmProfile + `
[backends.token]
type = "pkcs11"
module = "m.so"
slot = 0
pin_file = "pin"
key_id = "0a0b"
cert = "c.pem"
issue_command = ["/bin/true"]
`, []string{"backends.token.issue_command: does not apply to a pkcs11 backend"}},
		{"profile names no backend", hsmProfile, []string{"profiles.hsm.signer: there is no [backends.token]"}},
		{"type mismatch", hsmProfile + `
[backends.token]
type = "custom"
issue_command = ["/bin/true"]
revoke_command = ["/bin/true"]
`, []string{"profiles.hsm.signer: backends.token is a custom backend"}},
		{"custom hook outlasting the request", `
[server]
request_timeout_ms = 5000
[profiles.hooks]
backend = "custom"
signer = "h"
validity_hours = 1
challenges = ["http-01"]
[backends.h]
type = "custom"
issue_command = ["/bin/true"]
revoke_command = ["/bin/true"]
timeout_ms = 4500
`, []string{"backends.h.timeout_ms: must be shorter than server.request_timeout_ms - 1000 (4000)"}},
		{"relay", `
[profiles.up]
backend = "relay"
signer = "le"
validity_hours = 1
challenges = ["http-01"]
[backends.le]
type = "relay"
directory_url = "ftp://x"
`, []string{"backends.le.directory_url", "backends.le.account_key"}},
		{"relay dns01 missing its settings", `
[profiles.up]
backend = "relay"
signer = "le"
validity_hours = 1
challenges = ["http-01"]
[backends.le]
type = "relay"
directory_url = "https://acme.example/dir"
account_key = "a.key"
challenge_strategy = "dns01"
tsig_algorithm = "hmac-md5"
timeout_ms = 5000
propagation_wait_seconds = 5
eab_kid = "kid-1"
`, []string{"backends.le.dns_server", "backends.le.dns_zone", "backends.le.tsig_key_name", "backends.le.tsig_algorithm: must be one of hmac-sha256",
			"backends.le.tsig_secret_file", "backends.le.timeout_ms: must be longer than propagation_wait_seconds (5 s)",
			"backends.le.eab_kid: set both eab_kid and eab_hmac_key_file"}},
		{"relay strategy unknown", `
[profiles.up]
backend = "relay"
signer = "le"
validity_hours = 1
challenges = ["http-01"]
[backends.le]
type = "relay"
directory_url = "https://acme.example/dir"
account_key = "a.key"
challenge_strategy = "telepathy"
`, []string{"backends.le.challenge_strategy: must be bypass, dns01 or http01"}},
		{"relay dns01 with another challenge", `
[profiles.up]
backend = "relay"
signer = "le"
validity_hours = 1
challenges = ["http-01"]
[backends.le]
type = "relay"
directory_url = "https://acme.example/dir"
account_key = "a.key"
challenge = "http-01"
challenge_strategy = "dns01"
dns_server = "127.0.0.1:53"
dns_zone = "example.com"
tsig_key_name = "k"
tsig_algorithm = "hmac-sha256"
tsig_secret_file = "k.secret"
`, []string{"backends.le.challenge: challenge_strategy dns01 answers dns-01 challenges"}},
		{"unknown key", `
[backends.x]
type = "relay"
pin = "1234"
`, []string{"unknown keys: backends.x.pin"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := load(t, tc.body)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("valid configuration refused: %v", err)
				}
				b := cfg.Backends["token"]
				if b.MaxSessions != cfg.Worker.Concurrency+2 || !filepath.IsAbs(b.Cert) || b.TimeoutMS != min(10000, cfg.Worker.JobTimeoutMS/2) {
					t.Fatalf("defaults not applied: %+v", b)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted; want errors %v", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestRelayDNS01Defaults: a dns01 relay that names no challenge answers
// dns-01, and its secret files are found next to the configuration file.
func TestRelayDNS01Defaults(t *testing.T) {
	t.Parallel()
	cfg, err := load(t, `
[profiles.up]
backend = "relay"
signer = "le"
validity_hours = 1
challenges = ["http-01"]
[backends.le]
type = "relay"
directory_url = "https://acme.example/dir"
account_key = "a.key"
challenge_strategy = "dns01"
dns_server = "127.0.0.1:53"
dns_zone = "example.com"
tsig_key_name = "k"
tsig_algorithm = "hmac-sha256"
tsig_secret_file = "k.secret"
eab_kid = "kid-1"
eab_hmac_key_file = "eab.key"
`)
	if err != nil {
		t.Fatalf("a valid dns01 relay refused: %v", err)
	}
	b := cfg.Backends["le"]
	if b.Challenge != "dns-01" || !filepath.IsAbs(b.TSIGSecretFile) || !filepath.IsAbs(b.EABHMACKeyFile) {
		t.Errorf("defaults not applied: challenge %q, tsig_secret_file %q, eab_hmac_key_file %q", b.Challenge, b.TSIGSecretFile, b.EABHMACKeyFile)
	}
}
