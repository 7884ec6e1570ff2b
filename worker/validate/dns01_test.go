package validate

import (
	"crypto/sha256"
	"encoding/base64"
	"testing"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

func txtDigest(keyAuth string) string {
	sum := sha256.Sum256([]byte(keyAuth))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func TestDNS01(t *testing.T) {
	t.Parallel()
	good := txtDigest(testKeyAuth)
	tests := []struct {
		name     string
		records  []string
		servfail string
		id       acme.Identifier
		wildcard bool
		want     acme.ProblemType
		mentions []string
	}{
		{
			name:    "TXT record matches",
			records: []string{`_acme-challenge.example.test. 60 IN TXT "` + good + `"`},
			id:      dnsID("example.test"),
		},
		{
			name:    "one of several TXT records matches",
			records: []string{`_acme-challenge.example.test. 60 IN TXT "stale"`, `_acme-challenge.example.test. 60 IN TXT "` + good + `"`},
			id:      dnsID("example.test"),
		},
		{
			name:    "value split across character-strings",
			records: []string{`_acme-challenge.example.test. 60 IN TXT "` + good[:20] + `" "` + good[20:] + `"`},
			id:      dnsID("example.test"),
		},
		{
			name:     "wildcard authorization by dns-01",
			records:  []string{`_acme-challenge.example.test. 60 IN TXT "` + good + `"`},
			id:       dnsID("example.test"),
			wildcard: true,
		},
		{
			name:     "wrong TXT value",
			records:  []string{`_acme-challenge.example.test. 60 IN TXT "wrong-value"`},
			id:       dnsID("example.test"),
			want:     acme.ProblemUnauthorized,
			mentions: []string{"_acme-challenge.example.test", `found "wrong-value"`, good},
		},
		{
			name:     "name exists without TXT",
			records:  []string{`_acme-challenge.example.test. 60 IN A 127.0.0.1`},
			id:       dnsID("example.test"),
			want:     acme.ProblemUnauthorized,
			mentions: []string{"No TXT record found at _acme-challenge.example.test"},
		},
		{
			name:     "NXDOMAIN",
			id:       dnsID("example.test"),
			want:     acme.ProblemDNS,
			mentions: []string{"NXDOMAIN looking up TXT for _acme-challenge.example.test"},
		},
		{
			name:     "SERVFAIL",
			servfail: "_acme-challenge.example.test",
			id:       dnsID("example.test"),
			want:     acme.ProblemDNS,
			mentions: []string{"SERVFAIL looking up TXT for _acme-challenge.example.test"},
		},
		{
			name: "via CNAME",
			records: []string{
				`_acme-challenge.example.test. 60 IN CNAME example.test.acme-dns.test.`,
				`example.test.acme-dns.test. 60 IN TXT "` + good + `"`,
			},
			id: dnsID("example.test"),
		},
		{
			name: "via a chain of CNAMEs",
			records: []string{
				`_acme-challenge.example.test. 60 IN CNAME one.test.`,
				`one.test. 60 IN CNAME two.test.`,
				`two.test. 60 IN TXT "` + good + `"`,
			},
			id: dnsID("example.test"),
		},
		{
			name: "CNAME to nowhere",
			records: []string{
				`_acme-challenge.example.test. 60 IN CNAME gone.test.`,
			},
			id:       dnsID("example.test"),
			want:     acme.ProblemDNS,
			mentions: []string{"NXDOMAIN looking up TXT for gone.test"},
		},
		{
			name: "CNAME loop",
			records: []string{
				`_acme-challenge.example.test. 60 IN CNAME loop.test.`,
				`loop.test. 60 IN CNAME _acme-challenge.example.test.`,
			},
			id:       dnsID("example.test"),
			want:     acme.ProblemDNS,
			mentions: []string{"CNAME loop", "_acme-challenge.example.test"},
		},
		{
			name:     "IP identifier cannot use dns-01",
			id:       ipID("127.0.0.1"),
			want:     acme.ProblemMalformed,
			mentions: []string{"dns-01 cannot validate the IP address 127.0.0.1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := newTestDNS(t)
			d.add(t, tc.records...)
			if tc.servfail != "" {
				d.rcode(tc.servfail, 2)
			}
			res := New(testConfig(d)).Validate(t.Context(), Request{
				Identifier: tc.id, Wildcard: tc.wildcard, Type: acme.ChallengeDNS01, Token: testToken,
				KeyAuthorization: testKeyAuth, AccountURI: testAccount,
			})
			if res.Problem != nil {
				t.Logf("%s: %s", res.Problem.Type, res.Problem.Detail)
			}
			checkResult(t, res, tc.want, tc.mentions...)
			if tc.want != acme.ProblemMalformed && (len(res.Record) != 1 || res.Record[0].Hostname != "_acme-challenge."+tc.id.Value) {
				t.Errorf("record = %+v, want one attempt at _acme-challenge.%s", res.Record, tc.id.Value)
			}
		})
	}
}

// TestRequestChecks covers requests no challenge may satisfy; none of them
// reaches the network.
func TestRequestChecks(t *testing.T) {
	t.Parallel()
	d := newTestDNS(t)
	base := Request{Identifier: dnsID("example.test"), Type: acme.ChallengeHTTP01, Token: testToken, KeyAuthorization: testKeyAuth}
	tests := []struct {
		name   string
		modify func(r *Request, cfg *Config)
		want   acme.ProblemType
	}{
		{"wildcard by http-01", func(r *Request, _ *Config) { r.Wildcard = true }, acme.ProblemMalformed},
		{"wildcard by tls-alpn-01", func(r *Request, _ *Config) { r.Wildcard = true; r.Type = acme.ChallengeTLSALPN01 }, acme.ProblemMalformed},
		{"wildcard prefix in the identifier", func(r *Request, _ *Config) { r.Identifier.Value = "*.example.test" }, acme.ProblemMalformed},
		{"name with a port", func(r *Request, _ *Config) { r.Identifier.Value = "example.test:8080" }, acme.ProblemMalformed},
		{"name with a path", func(r *Request, _ *Config) { r.Identifier.Value = "example.test/x" }, acme.ProblemMalformed},
		{"IP identifier that is not an IP", func(r *Request, _ *Config) { r.Identifier = ipID("example.test") }, acme.ProblemMalformed},
		{"IP wildcard", func(r *Request, _ *Config) { r.Identifier = ipID("127.0.0.1"); r.Wildcard = true }, acme.ProblemMalformed},
		{"unknown identifier type", func(r *Request, _ *Config) { r.Identifier.Type = "email" }, acme.ProblemUnsupportedIdentifier},
		{"unknown challenge type", func(r *Request, _ *Config) { r.Type = "tls-sni-01" }, acme.ProblemMalformed},
		{"token with a slash", func(r *Request, _ *Config) { r.Token = "../x"; r.KeyAuthorization = "../x.y" }, acme.ProblemMalformed},
		{"key authorization for another token", func(r *Request, _ *Config) { r.KeyAuthorization = "other.thumb" }, acme.ProblemServerInternal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, cfg := base, testConfig(d)
			tc.modify(&r, &cfg)
			res := New(cfg).Validate(t.Context(), r)
			checkResult(t, res, tc.want)
			if len(res.Record) != 0 {
				t.Errorf("a rejected request recorded attempts: %+v", res.Record)
			}
		})
	}
}
