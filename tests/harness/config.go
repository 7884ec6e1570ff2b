package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Config is one process's hallmark.toml. The fields are what the test
// packages vary; the Extra strings are further TOML lines for their table,
// and Tables further tables after the last.
type Config struct {
	Top           string // TOML before the first table
	DatabaseURL   string
	DatabaseExtra string

	Listen           string
	PublicHTTPListen string
	ServerExtra      string // e.g. tls_cert and tls_key, or base_url and plain_http

	HealthListen string
	WorkerExtra  string

	Resolver                      string // the DNS server validation resolves through
	HTTPPort, HTTPSPort, ALPNPort int    // where validation connects
	ChallengeTimeoutMS            int
	ChallengeExtra                string

	CADir   string
	CAExtra string

	Tables string
}

// TOML renders the configuration.
func (c Config) TOML() string {
	return fmt.Sprintf(`%s
[database]
url = %q
%s

[server]
listen = %q
public_http_listen = %q
caa_identities = ["hallmark.test"]
retry_after_seconds = 1
%s

[worker]
health_listen = %q
%s

[challenge]
resolvers = [%q]
http_port = %d
https_port = %d
tls_alpn_port = %d
timeout_ms = %d
%s

[ca]
dir = %q
%s
%s`, c.Top, c.DatabaseURL, c.DatabaseExtra,
		c.Listen, c.PublicHTTPListen, c.ServerExtra,
		c.HealthListen, c.WorkerExtra,
		c.Resolver, c.HTTPPort, c.HTTPSPort, c.ALPNPort, c.ChallengeTimeoutMS, c.ChallengeExtra,
		c.CADir, c.CAExtra, c.Tables)
}

// WriteConfig writes c to dir/name.toml and returns its path.
func WriteConfig(t *testing.T, dir, name string, c Config) string {
	t.Helper()
	p := filepath.Join(dir, name+".toml")
	if err := os.WriteFile(p, []byte(c.TOML()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
