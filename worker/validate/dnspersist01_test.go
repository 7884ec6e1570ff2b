package validate

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// persistTXT is a _validation-persist record line for owner.
func persistTXT(owner, value string) string {
	return fmt.Sprintf(`_validation-persist.%s. 60 IN TXT "%s"`, owner, value)
}

func TestDNSPersist01(t *testing.T) {
	t.Parallel()
	ours := testCAA + "; accounturi=" + testAccount
	past := time.Now().Add(-time.Hour).Unix()
	future := time.Now().Add(time.Hour).Unix()
	tests := []struct {
		name     string
		records  []string
		id       acme.Identifier
		wildcard bool
		want     acme.ProblemType
		mentions []string
	}{
		{name: "record for this CA and account", records: []string{persistTXT("example.test", ours)}, id: dnsID("example.test")},
		{name: "among other CAs' records, malformed ones included",
			records: []string{persistTXT("example.test", "other.example; accounturi=x; accounturi=y"), persistTXT("example.test", "v=spf1 -all"),
				persistTXT("example.test", ours)},
			id: dnsID("example.test")},
		{name: "issuer in upper case", records: []string{persistTXT("example.test", "HALLMARK.test; accounturi="+testAccount)}, id: dnsID("example.test")},
		{name: "split across character-strings", records: []string{`_validation-persist.example.test. 60 IN TXT "` + testCAA + `;" " accounturi=` + testAccount + `"`},
			id: dnsID("example.test")},
		{name: "persistUntil ahead", records: []string{persistTXT("example.test", fmt.Sprintf("%s; persistUntil=%d", ours, future))}, id: dnsID("example.test")},
		{name: "wildcard with policy=wildcard", records: []string{persistTXT("example.test", ours+"; policy=wildcard")}, id: dnsID("example.test"), wildcard: true},
		{name: "subdomain by its parent's policy=wildcard", records: []string{persistTXT("example.test", ours+"; policy=wildcard")}, id: dnsID("www.dept.example.test")},
		{name: "wildcard of a subdomain by an ancestor's policy=wildcard", records: []string{persistTXT("example.test", ours+"; policy=wildcard")},
			id: dnsID("dept.example.test"), wildcard: true},

		{name: "wildcard without policy=wildcard", records: []string{persistTXT("example.test", ours)}, id: dnsID("example.test"), wildcard: true,
			want: acme.ProblemUnauthorized, mentions: []string{"no policy=wildcard", "*.example.test"}},
		{name: "subdomain without policy=wildcard", records: []string{persistTXT("example.test", ours)}, id: dnsID("www.example.test"),
			want: acme.ProblemUnauthorized, mentions: []string{"_validation-persist.example.test", "a subdomain needs"}},
		{name: "another account", records: []string{persistTXT("example.test", testCAA+"; accounturi=https://ca.hallmark.test/acme/acct/43")},
			id: dnsID("example.test"), want: acme.ProblemUnauthorized, mentions: []string{"another account"}},
		{name: "account URL in another case", records: []string{persistTXT("example.test", testCAA+"; accounturi="+strings.ToUpper(testAccount))},
			id: dnsID("example.test"), want: acme.ProblemUnauthorized, mentions: []string{"another account"}},
		{name: "after persistUntil", records: []string{persistTXT("example.test", fmt.Sprintf("%s; persistUntil=%d", ours, past))},
			id: dnsID("example.test"), want: acme.ProblemUnauthorized, mentions: []string{"expired at its persistUntil"}},
		{name: "another CA only", records: []string{persistTXT("example.test", "other.example; accounturi="+testAccount)},
			id: dnsID("example.test"), want: acme.ProblemUnauthorized, mentions: []string{"No TXT record at _validation-persist.example.test names this CA (hallmark.test)"}},
		{name: "our record with a parameter twice", records: []string{persistTXT("example.test", ours+"; policy=wildcard; policy=wildcard")},
			id: dnsID("example.test"), want: acme.ProblemMalformed, mentions: []string{"appears twice"}},
		{name: "our record without accounturi", records: []string{persistTXT("example.test", testCAA)},
			id: dnsID("example.test"), want: acme.ProblemMalformed, mentions: []string{"no accounturi"}},
		{name: "our record with a bad persistUntil", records: []string{persistTXT("example.test", ours+"; persistUntil=tomorrow")},
			id: dnsID("example.test"), want: acme.ProblemMalformed, mentions: []string{"persistUntil"}},
		{name: "no record at all", id: dnsID("example.test"), want: acme.ProblemUnauthorized, mentions: []string{"No TXT record"}},
		{name: "CAA validationmethods excludes it",
			records: []string{persistTXT("example.test", ours), `example.test. CAA 0 issue "hallmark.test; validationmethods=dns-01"`},
			id:      dnsID("example.test"), want: acme.ProblemCAA, mentions: []string{"dns-persist-01"}},
		{name: "CAA validationmethods names it",
			records: []string{persistTXT("example.test", ours), `example.test. CAA 0 issue "hallmark.test; validationmethods=dns-persist-01"`},
			id:      dnsID("example.test")},
		{name: "IPv4 address by its reverse zone", records: []string{`_ip-validation-persist.7.2.0.192.in-addr.arpa. 60 IN TXT "` + ours + `"`},
			id: ipID("192.0.2.7")},
		{name: "IPv6 address by its reverse zone",
			records: []string{`_ip-validation-persist.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa. 60 IN TXT "` + ours + `"`},
			id:      ipID("2001:db8::1")},
		{name: "IP address: the forward name's record does not do", records: []string{persistTXT("192.0.2.7", ours)}, id: ipID("192.0.2.7"),
			want: acme.ProblemUnauthorized, mentions: []string{"_ip-validation-persist.7.2.0.192.in-addr.arpa"}},
		{name: "IP address: a network's record does not do", records: []string{`_ip-validation-persist.2.0.192.in-addr.arpa. 60 IN TXT "` + ours + `; policy=wildcard"`},
			id: ipID("192.0.2.7"), want: acme.ProblemUnauthorized, mentions: []string{"No TXT record"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := newTestDNS(t)
			d.add(t, tc.records...)
			res := New(testConfig(d)).Validate(t.Context(), Request{
				Identifier: tc.id, Wildcard: tc.wildcard, Type: acme.ChallengeDNSPersist01, Token: testToken,
				KeyAuthorization: testKeyAuth, AccountURI: testAccount,
			})
			if res.Problem != nil {
				t.Logf("%s: %s", res.Problem.Type, res.Problem.Detail)
			}
			checkResult(t, res, tc.want, tc.mentions...)
		})
	}
}

func TestDNSPersist01ServfailIsNotAbsence(t *testing.T) {
	t.Parallel()
	d := newTestDNS(t)
	d.rcode("_validation-persist.example.test", 2)
	res := New(testConfig(d)).Validate(t.Context(), Request{
		Identifier: dnsID("example.test"), Type: acme.ChallengeDNSPersist01, Token: testToken, KeyAuthorization: testKeyAuth, AccountURI: testAccount,
	})
	checkResult(t, res, acme.ProblemDNS, "SERVFAIL looking up TXT for _validation-persist.example.test")
}

func TestDNSAccount01(t *testing.T) {
	t.Parallel()
	good := txtDigest(testKeyAuth)
	label := AccountLabel(testAccount)
	tests := []struct {
		name     string
		records  []string
		wildcard bool
		want     acme.ProblemType
		mentions []string
	}{
		{name: "record at the account's label", records: []string{label + `._acme-challenge.example.test. 60 IN TXT "` + good + `"`}},
		{name: "wildcard at the base name", records: []string{label + `._acme-challenge.example.test. 60 IN TXT "` + good + `"`}, wildcard: true},
		{name: "another account's label", records: []string{AccountLabel(testAccount+"3") + `._acme-challenge.example.test. 60 IN TXT "` + good + `"`},
			want: acme.ProblemDNS, mentions: []string{"NXDOMAIN", label + "._acme-challenge.example.test"}},
		{name: "dns-01's name does not do", records: []string{`_acme-challenge.example.test. 60 IN TXT "` + good + `"`},
			want: acme.ProblemDNS, mentions: []string{label + "._acme-challenge.example.test"}},
		{name: "wrong value", records: []string{label + `._acme-challenge.example.test. 60 IN TXT "stale"`},
			want: acme.ProblemUnauthorized, mentions: []string{`found "stale"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := newTestDNS(t)
			d.add(t, tc.records...)
			res := New(testConfig(d)).Validate(t.Context(), Request{
				Identifier: dnsID("example.test"), Wildcard: tc.wildcard, Type: acme.ChallengeDNSAccount01, Token: testToken,
				KeyAuthorization: testKeyAuth, AccountURI: testAccount,
			})
			checkResult(t, res, tc.want, tc.mentions...)
			if len(res.Record) != 1 || res.Record[0].Hostname != label+"._acme-challenge.example.test" {
				t.Errorf("record = %+v, want one attempt at %s._acme-challenge.example.test", res.Record, label)
			}
		})
	}
}

// TestDNSPersist01HashedAccountURI: with a hash prefix configured, a
// record may name the account by draft -02's hashed URI of its current key,
// for the record's own name or for "*", or of a key it replaced; a hash of
// another key does not validate, and one under the prefix that is not sha-256 is malformed.
func TestDNSPersist01HashedAccountURI(t *testing.T) {
	t.Parallel()
	const prefix = "https://ca.hallmark.test/acme/account-hash/"
	thumb := strings.TrimPrefix(testKeyAuth, testToken+".")
	hashed := func(domain string) string { return HashedAccountURI(prefix, domain, thumb, testAccount) }
	tests := []struct {
		name     string
		owner    string
		uri      string
		id       string
		want     acme.ProblemType
		mentions []string
	}{
		{"hash for the name", "example.test", hashed("example.test"), "example.test", "", nil},
		{"hash for every name", "example.test", hashed("*"), "example.test", "", nil},
		{"ancestor's record hashed for the ancestor", "example.test", hashed("example.test"), "www.example.test", "", nil},
		{"hash for another name", "example.test", hashed("other.test"), "example.test", acme.ProblemUnauthorized, []string{"another account"}},
		{"hash of another key", "example.test", HashedAccountURI(prefix, "example.test", "x"+thumb[1:], testAccount), "example.test",
			acme.ProblemUnauthorized, []string{"another account"}},
		{"hash of a key the account replaced", "example.test", HashedAccountURI(prefix, "example.test", "prior-"+thumb[6:], testAccount), "example.test", "", nil},
		{"another algorithm", "example.test", prefix + "sha-512/" + strings.Repeat("A", 86), "example.test", acme.ProblemMalformed, []string{"not sha-256"}},
		{"digest cut short", "example.test", prefix + "sha-256/abc", "example.test", acme.ProblemMalformed, []string{"43 characters"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := newTestDNS(t)
			d.add(t, persistTXT(tc.owner, testCAA+"; accounturi="+tc.uri+"; policy=wildcard"))
			cfg := testConfig(d)
			cfg.AccountHashPrefix = prefix
			res := New(cfg).Validate(t.Context(), Request{Identifier: dnsID(tc.id), Type: acme.ChallengeDNSPersist01, Token: testToken,
				KeyAuthorization: testKeyAuth, AccountURI: testAccount, PriorThumbprints: []string{"older", "prior-" + thumb[6:]}})
			checkResult(t, res, tc.want, tc.mentions...)
		})
	}
}
