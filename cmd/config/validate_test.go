package config_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/cmd/config"
)

// TestValidateRanges: settings a worker or frontend would start with and
// then fail on (a ticker of zero panics the worker, a CRL valid for zero
// hours is never signed, one valid for less than two scheduling intervals
// expires before its successor) are refused by check-config, naming the key.
func TestValidateRanges(t *testing.T) {
	t.Parallel()
	cases := []struct {
		body, wantKey string
	}{
		{"[worker]\ncrl_interval_minutes = 0\n", "worker.crl_interval_minutes"},
		{"[worker]\ncrl_interval_minutes = -5\n", "worker.crl_interval_minutes"},
		{"[ca]\ncrl_validity_hours = 0\n", "ca.crl_validity_hours"},
		{"[ca]\ncrl_validity_hours = -24\n", "ca.crl_validity_hours"},
		{"[ca]\ncrl_shards = 0\n", "ca.crl_shards"},
		{"[ca]\ncountry = \"de\"\n", "ca.country"},
		{"[ca]\ncountry = \"DEU\"\n", "ca.country"},
		{"[ca]\ncrl_shards = 1025\n", "ca.crl_shards"},
		{"[ca]\ncrl_validity_hours = 1\n[worker]\ncrl_interval_minutes = 600\n", "worker.crl_interval_minutes"},
		{"[ca]\ncrl_validity_hours = 2\n[worker]\ncrl_interval_minutes = 60\n", "worker.crl_interval_minutes"},
		{"[server]\nnonce_lifetime_seconds = 0\n", "server.nonce_lifetime_seconds"},
		{"[server]\norder_lifetime_hours = -1\n", "server.order_lifetime_hours"},
		{"[server]\nauthz_lifetime_hours = 0\n", "server.authz_lifetime_hours"},
		{"[server]\nretry_after_seconds = -1\n", "server.retry_after_seconds"},
		{"[server]\nverdict_wait_ms = -1\n", "server.verdict_wait_ms"},
		// The wait's answer must fit in the request's time.
		{"[server]\nrequest_timeout_ms = 3000\nverdict_wait_ms = 2001\n", "server.verdict_wait_ms"},
		{"[database]\nmax_conns = -3\n", "database.max_conns"},
		{"[challenge]\nhttp_port = 0\n", "challenge.http_port"},
		{"[challenge]\ntls_alpn_port = 70000\n", "challenge.tls_alpn_port"},
		{"[challenge]\nhttps_port = -1\n", "challenge.https_port"},
		{"[server]\nrequest_id_trusted_proxies = [\"10.0.0.0/33\"]\n", "server.request_id_trusted_proxies"},
		{"[server]\nrequest_id_trusted_proxies = [\"proxy.corp.example\"]\n", "server.request_id_trusted_proxies"},
		{"[audit]\nretention_days = -1\n", "audit.retention_days"},
		{"[limits]\npause_after_days = -1\n", "limits.pause_after_days"},
		{"[limits]\npause_min_failures = -2\n", "limits.pause_min_failures"},
		// A profile's name is its job queue's (jobs.ProfileQueue), which
		// River takes only in lowercase, '_' or '-' separated, ≤ 64 chars.
		{"[profiles.Short]\nvalidity_hours = 24\n", "profiles.Short"},
		{"[profiles.\"tls.server\"]\nvalidity_hours = 24\n", "profiles.tls.server"},
		{"[profiles.short__lived]\nvalidity_hours = 24\n", "profiles.short__lived"},
		{"[profiles." + strings.Repeat("a", 57) + "]\nvalidity_hours = 24\n", "profiles." + strings.Repeat("a", 57)},
		// What a profile allows, its challenges must be able to validate.
		{"[profiles.web]\nbackend = \"local\"\nvalidity_hours = 24\nchallenges = [\"http-01\", \"tls-alpn-01\"]\nallow_wildcards = true\n", "profiles.web.allow_wildcards"},
		{"[profiles.dns]\nbackend = \"local\"\nvalidity_hours = 24\nchallenges = [\"dns-01\"]\nidentifier_types = [\"dns\", \"ip\"]\n", "profiles.dns.identifier_types"},
		// Usages the signer cannot set, or that leave an ECDSA or Ed25519
		// leaf no key usage (RFC 8813 §3), would fail every order.
		{"[profiles.web]\nbackend = \"local\"\nvalidity_hours = 24\nchallenges = [\"http-01\"]\nkey_usages = [\"digitalSignature\", \"certSign\"]\n", "profiles.web.key_usages"},
		{"[profiles.web]\nbackend = \"local\"\nvalidity_hours = 24\nchallenges = [\"http-01\"]\next_key_usages = [\"codeSigning\"]\n", "profiles.web.ext_key_usages"},
		{"[profiles.web]\nbackend = \"local\"\nvalidity_hours = 24\nchallenges = [\"http-01\"]\nkey_usages = [\"keyEncipherment\"]\n", "profiles.web.key_usages"},
		// dns-persist-01's records name the CA by its CAA identities.
		{"[server]\ncaa_identities = []\n[profiles.standing]\nbackend = \"local\"\nvalidity_hours = 24\nchallenges = [\"dns-persist-01\"]\n", "profiles.standing.challenges"},
		{"[profiles.web]\nbackend = \"local\"\nvalidity_hours = 24\nchallenges = [\"dns-persist-02\"]\n", "profiles.web.challenges"},
		// perspectives = true needs perspectives to ask.
		{"[profiles.web]\nbackend = \"local\"\nvalidity_hours = 24\nchallenges = [\"http-01\"]\nperspectives = true\n", "profiles.web.perspectives"},
		{"[profiles.addr]\nbackend = \"local\"\nvalidity_hours = 24\nchallenges = [\"dns-account-01\"]\nidentifier_types = [\"ip\"]\n", "profiles.addr.identifier_types"},
	}
	for _, tc := range cases {
		_, err := load(t, tc.body)
		if err == nil || !strings.Contains(err.Error(), tc.wantKey+":") {
			t.Errorf("%q: error %v, want one naming %s", tc.body, err, tc.wantKey)
		}
	}
	// The edges that work are accepted.
	for _, body := range []string{
		"",
		"[ca]\ncrl_validity_hours = 1\n[worker]\ncrl_interval_minutes = 29\n",
		"[ca]\ncrl_shards = 1\n", "[ca]\ncrl_shards = 1024\n", "[ca]\ncountry = \"DE\"\n",
		"[server]\nretry_after_seconds = 0\n[database]\nmax_conns = 0\n",
		"[server]\nverdict_wait_ms = 0\n",
		"[server]\nrequest_timeout_ms = 3000\nverdict_wait_ms = 2000\n",
		"[challenge]\nhttp_port = 65535\ntls_alpn_port = 1\n",
		"[server]\nrequest_id_trusted_proxies = [\"10.0.0.0/8\", \"192.0.2.7\", \"fd00::/8\"]\n[audit]\nretention_days = 1130\n",
		"[profiles.wild]\nbackend = \"local\"\nvalidity_hours = 24\nchallenges = [\"dns-01\"]\nallow_wildcards = true\n" +
			"[profiles.ip]\nbackend = \"local\"\nvalidity_hours = 24\nchallenges = [\"tls-alpn-01\"]\nidentifier_types = [\"ip\"]\n",
		"[profiles.standing]\nbackend = \"local\"\nvalidity_hours = 24\nchallenges = [\"dns-persist-01\"]\nallow_wildcards = true\n" +
			"[profiles.label]\nbackend = \"local\"\nvalidity_hours = 24\nchallenges = [\"dns-account-01\"]\nallow_wildcards = true\n" +
			"[profiles.addr]\nbackend = \"local\"\nvalidity_hours = 24\nchallenges = [\"dns-persist-01\"]\nidentifier_types = [\"ip\"]\n",
		"[profiles.rsa]\nbackend = \"local\"\nvalidity_hours = 24\nchallenges = [\"http-01\"]\nkey_types = [\"rsa2048\"]\nkey_usages = [\"keyEncipherment\"]\n",
		"[profiles.short-lived_2]\nbackend = \"local\"\nvalidity_hours = 24\nchallenges = [\"http-01\"]\n" +
			"[profiles." + strings.Repeat("a", 56) + "]\nbackend = \"local\"\nvalidity_hours = 24\nchallenges = [\"http-01\"]\n",
	} {
		if _, err := load(t, body); err != nil {
			t.Errorf("%q refused: %v", body, err)
		}
	}
}

// TestDatabaseURLFromEnvWithoutFile: HALLMARK_DATABASE_URL overrides
// database.url with no configuration file too; before, a container setting
// only the variable ran on a throwaway SQLite file.
func TestDatabaseURLFromEnvWithoutFile(t *testing.T) {
	const url = "postgres://hallmark@db.internal:5432/hallmark"
	t.Setenv("HALLMARK_DATABASE_URL", url)
	for _, path := range []string{"", "file"} {
		var c config.Config
		var err error
		if path == "" {
			c, err = config.Load("")
		} else {
			c, err = load(t, "[database]\nurl = \"sqlite:elsewhere.db\"\n")
		}
		if err != nil {
			t.Fatal(err)
		}
		if c.Database.URL != url {
			t.Errorf("config file %q: database.url = %q with HALLMARK_DATABASE_URL=%q", path, c.Database.URL, url)
		}
	}
}

// TestProfileUsagesDefault: a profile table is decoded whole, so one that
// names no key usages (a new profile, or [profiles.default] written out)
// gets the built-in profile's, not none; usages it names are kept.
func TestProfileUsagesDefault(t *testing.T) {
	t.Parallel()
	c, err := load(t, `
[profiles.default]
backend = "local"
validity_hours = 720
challenges = ["http-01"]

[profiles.clients]
backend = "local"
validity_hours = 24
challenges = ["http-01"]
key_usages = ["digitalSignature"]
ext_key_usages = ["clientAuth"]
`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2][]string{
		"default": {{"digitalSignature", "keyEncipherment"}, {"serverAuth"}},
		"clients": {{"digitalSignature"}, {"clientAuth"}},
	}
	for name, w := range want {
		p := c.Profiles[name]
		if !slices.Equal(p.KeyUsages, w[0]) || !slices.Equal(p.ExtKeyUsages, w[1]) {
			t.Errorf("profiles.%s: key_usages %v ext_key_usages %v, want %v %v", name, p.KeyUsages, p.ExtKeyUsages, w[0], w[1])
		}
	}
}

// TestEveryProblemAtOnce: each section's owner checks its own keys and
// cmd/config those across sections, and check-config reports all of them
// in one run, each naming its key, so an operator fixes the file in one go.
func TestEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "hallmark.toml")
	body := `default_profile = "gold"
[database]
max_conns = -1
[server]
max_body_bytes = 5
[admin]
listen = "127.0.0.1:14090"
[worker]
concurrency = 0
heartbeat_ms = 100
defer_max_ms = 0
[challenge]
http_port = 0
timeout_ms = 40000
[policy]
deny_ip_ranges = ["10.0.0.0/33"]
[ca]
crl_validity_hours = 0
[profiles.web]
backend = "local"
validity_hours = 0
challenges = ["http-01"]
[limits]
orders_per_account = -1
[backends.b]
type = "magic"
[access.checks.geo]
kind = "geoip"
`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := config.LoadWorker(path)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, key := range []string{"database.max_conns", "server.max_body_bytes", "admin.token_file", "worker.concurrency",
		"challenge.http_port", "policy.deny_ip_ranges", "ca.crl_validity_hours", "profiles.web.validity_hours",
		"limits.orders_per_account", "backends.b.type", "challenge.timeout_ms", "default_profile", "challenge.resolvers",
		"access.checks.geo.kind", "worker.heartbeat_ms", "worker.defer_max_ms"} {
		if !strings.Contains(err.Error(), "\n  "+key+": ") {
			t.Errorf("the report does not name %s:\n%v", key, err)
		}
	}
}

// TestPauseDefaults: pausing is on when [limits] says nothing of it (7
// days, 10 failures), and pause_after_days = 0 turns it off.
func TestPauseDefaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body      string
		wantDays  int
		wantFails int
	}{
		{"", 7, 10},
		{"[limits]\npause_after_days = 3\npause_min_failures = 4\n", 3, 4},
		{"[limits]\npause_after_days = 0\n", 0, 0},
	} {
		c, err := load(t, tc.body)
		if err != nil {
			t.Fatalf("%q: %v", tc.body, err)
		}
		after, fails := c.Limits.Pause()
		if int(after.Hours()/24) != tc.wantDays || fails != tc.wantFails {
			t.Errorf("%q: pause after %s and %d failures, want %d days and %d", tc.body, after, fails, tc.wantDays, tc.wantFails)
		}
	}
}
