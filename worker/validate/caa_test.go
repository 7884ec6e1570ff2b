package validate

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

func TestCheckCAA(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		records  []string
		servfail []string
		id       acme.Identifier
		wildcard bool
		method   acme.ChallengeType // http-01 when empty
		account  string             // testAccount when empty
		want     acme.ProblemType
		mentions []string
	}{
		{name: "no CAA anywhere", id: dnsID("www.example.test")},
		{
			name:    "issue names us",
			records: []string{`example.test. CAA 0 issue "hallmark.test"`},
			id:      dnsID("example.test"),
		},
		{
			name:     "issue names another CA",
			records:  []string{`example.test. CAA 0 issue "other-ca.test"`},
			id:       dnsID("example.test"),
			want:     acme.ProblemCAA,
			mentions: []string{"CAA record for example.test prevents issuance for example.test", `issue "other-ca.test" names another CA`},
		},
		{
			name:     "empty issuer forbids everyone",
			records:  []string{`example.test. CAA 0 issue ";"`},
			id:       dnsID("example.test"),
			want:     acme.ProblemCAA,
			mentions: []string{"authorizes no CA"},
		},
		{
			name:    "one of several issue records names us",
			records: []string{`example.test. CAA 0 issue "other-ca.test"`, `example.test. CAA 0 issue "hallmark.test"`},
			id:      dnsID("example.test"),
		},
		{
			name:    "tags and issuer match case-insensitively",
			records: []string{`example.test. CAA 0 ISSUE "HallMark.TEST"`},
			id:      dnsID("example.test"),
		},
		{
			name:    "only iodef: no restriction",
			records: []string{`example.test. CAA 0 iodef "mailto:security@example.test"`},
			id:      dnsID("example.test"),
		},
		{
			name:     "tree climbing: the parent's record applies",
			records:  []string{`example.test. CAA 0 issue "other-ca.test"`},
			id:       dnsID("www.sub.example.test"),
			want:     acme.ProblemCAA,
			mentions: []string{"CAA record for example.test prevents issuance for www.sub.example.test"},
		},
		{
			name:    "tree climbing: the closest non-empty RRset wins",
			records: []string{`example.test. CAA 0 issue "other-ca.test"`, `sub.example.test. CAA 0 issue "hallmark.test"`},
			id:      dnsID("www.sub.example.test"),
		},
		{
			name:     "tree climbing past a name with other records",
			records:  []string{`www.example.test. A 127.0.0.1`, `example.test. CAA 0 issue "other-ca.test"`},
			id:       dnsID("www.example.test"),
			want:     acme.ProblemCAA,
			mentions: []string{"CAA record for example.test"},
		},
		{
			name:    "CAA behind a CNAME",
			records: []string{`www.example.test. CNAME cdn.test.`, `cdn.test. CAA 0 issue "hallmark.test"`, `example.test. CAA 0 issue "other-ca.test"`},
			id:      dnsID("www.example.test"),
		},
		{
			name:     "issuewild forbids a wildcard",
			records:  []string{`example.test. CAA 0 issue "hallmark.test"`, `example.test. CAA 0 issuewild "other-ca.test"`},
			id:       dnsID("example.test"),
			wildcard: true,
			method:   acme.ChallengeDNS01,
			want:     acme.ProblemCAA,
			mentions: []string{"prevents issuance for *.example.test", `issuewild "other-ca.test" names another CA`},
		},
		{
			name:     "issuewild permits a wildcard that issue does not",
			records:  []string{`example.test. CAA 0 issue "other-ca.test"`, `example.test. CAA 0 issuewild "hallmark.test"`},
			id:       dnsID("example.test"),
			wildcard: true,
			method:   acme.ChallengeDNS01,
		},
		{
			name:     "wildcard falls back to issue",
			records:  []string{`example.test. CAA 0 issue "other-ca.test"`},
			id:       dnsID("example.test"),
			wildcard: true,
			method:   acme.ChallengeDNS01,
			want:     acme.ProblemCAA,
		},
		{
			name:    "issuewild alone does not restrict a non-wildcard",
			records: []string{`example.test. CAA 0 issuewild "other-ca.test"`},
			id:      dnsID("example.test"),
		},
		{
			name:    "accounturi matches",
			records: []string{`example.test. CAA 0 issue "hallmark.test; accounturi=` + testAccount + `"`},
			id:      dnsID("example.test"),
		},
		{
			name:     "accounturi mismatch",
			records:  []string{`example.test. CAA 0 issue "hallmark.test; accounturi=https://ca.hallmark.test/acme/acct/7"`},
			id:       dnsID("example.test"),
			want:     acme.ProblemCAA,
			mentions: []string{"restricted to another ACME account (accounturi)"},
		},
		{
			name:    "validationmethods includes the method",
			records: []string{`example.test. CAA 0 issue "hallmark.test; validationmethods=dns-01,http-01"`},
			id:      dnsID("example.test"),
		},
		{
			name:     "validationmethods excludes the method",
			records:  []string{`example.test. CAA 0 issue "hallmark.test; validationmethods=dns-01"`},
			id:       dnsID("example.test"),
			method:   acme.ChallengeTLSALPN01,
			want:     acme.ProblemCAA,
			mentions: []string{"does not allow the tls-alpn-01 validation method"},
		},
		{
			name:    "both parameters satisfied",
			records: []string{`example.test. CAA 0 issue "hallmark.test; validationmethods=http-01; accounturi=` + testAccount + `"`},
			id:      dnsID("example.test"),
		},
		{
			name:     "duplicate accounturi does not authorize",
			records:  []string{`example.test. CAA 0 issue "hallmark.test; accounturi=` + testAccount + `; accounturi=https://x.test/1"`},
			id:       dnsID("example.test"),
			want:     acme.ProblemCAA,
			mentions: []string{"appears twice"},
		},
		{
			name:     "malformed value does not authorize",
			records:  []string{`example.test. CAA 0 issue "hallmark.test; accounturi"`},
			id:       dnsID("example.test"),
			want:     acme.ProblemCAA,
			mentions: []string{"is malformed"},
		},
		{
			name:    "unknown parameter is ignored",
			records: []string{`example.test. CAA 0 issue "hallmark.test; policy=ev"`},
			id:      dnsID("example.test"),
		},
		{
			name:     "critical unknown tag forbids",
			records:  []string{`example.test. CAA 128 tbs "unknown"`, `example.test. CAA 0 issue "hallmark.test"`},
			id:       dnsID("example.test"),
			want:     acme.ProblemCAA,
			mentions: []string{`critical property "tbs"`, "example.test"},
		},
		{
			name:    "non-critical unknown tag is ignored",
			records: []string{`example.test. CAA 0 tbs "unknown"`, `example.test. CAA 0 issue "hallmark.test"`},
			id:      dnsID("example.test"),
		},
		{
			name:     "SERVFAIL is not permission",
			servfail: []string{"www.example.test"},
			id:       dnsID("www.example.test"),
			want:     acme.ProblemDNS,
			mentions: []string{"While checking CAA for www.example.test", "SERVFAIL looking up CAA for www.example.test"},
		},
		{
			name:     "SERVFAIL on a parent is not permission",
			servfail: []string{"example.test"},
			id:       dnsID("www.example.test"),
			want:     acme.ProblemDNS,
			mentions: []string{"SERVFAIL looking up CAA for example.test"},
		},
		{
			name:     "SERVFAIL above the relevant RRset does not matter",
			records:  []string{`www.example.test. CAA 0 issue "hallmark.test"`},
			servfail: []string{"example.test"},
			id:       dnsID("www.example.test"),
		},
		{
			name:    "IP identifiers have no CAA",
			records: []string{`1.0.0.127.in-addr.arpa. CAA 0 issue ";"`},
			id:      ipID("127.0.0.1"),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := newTestDNS(t)
			d.add(t, tc.records...)
			for _, n := range tc.servfail {
				d.rcode(n, 2)
			}
			method, account := tc.method, tc.account
			if method == "" {
				method = acme.ChallengeHTTP01
			}
			if account == "" {
				account = testAccount
			}
			p, err := New(testConfig(d)).CheckCAA(t.Context(), tc.id, tc.wildcard, method, account)
			if err != nil {
				t.Fatalf("the check could not run: %v", err)
			}
			if p != nil {
				t.Logf("%s: %s", p.Type, p.Detail)
			}
			checkProblem(t, p, tc.want, tc.mentions...)
		})
	}
}

// TestCAAClimbAsksEveryLevelAtOnce: the server answers no CAA question
// until it has been asked about every level of the name, so a climb that
// waited for each level's answer before asking the next would get none and
// fail on its timeout. The answers still decide as the climb's order says:
// the record at the middle level permits, the silent root-most level is
// never waited for.
func TestCAAClimbAsksEveryLevelAtOnce(t *testing.T) {
	t.Parallel()
	d := newTestDNS(t)
	d.add(t, `example.test. CAA 0 issue "hallmark.test"`)
	d.holdCAA(3) // www.example.test, example.test, test
	p, err := New(testConfig(d)).CheckCAA(t.Context(), dnsID("www.example.test"), false, acme.ChallengeHTTP01, testAccount)
	if err != nil {
		t.Fatal(err)
	}
	checkProblem(t, p, "")

	d = newTestDNS(t)
	d.add(t, `www.example.test. CAA 0 issue "hallmark.test"`)
	d.blackhole("example.test")
	d.blackhole("test")
	p, err = New(testConfig(d)).CheckCAA(t.Context(), dnsID("www.example.test"), false, acme.ChallengeHTTP01, testAccount)
	if err != nil {
		t.Fatal(err)
	}
	checkProblem(t, p, "")
}

// TestValidateRunsCAA proves Validate applies CAA after a passing challenge,
// and reports the challenge's own failure first.
func TestValidateRunsCAA(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want acme.ProblemType
	}{
		{"challenge passes, CAA forbids", testKeyAuth, acme.ProblemCAA},
		{"challenge fails, CAA forbids", "wrong", acme.ProblemUnauthorized},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := newTestDNS(t)
			d.host(t, "example.test")
			d.add(t, `example.test. CAA 0 issue "hallmark.test; validationmethods=dns-01"`)
			cfg := testConfig(d)
			cfg.HTTPPort = serveHTTP(t, respond(http.StatusOK, tc.body), false)
			res := New(cfg).Validate(t.Context(), Request{
				Identifier: dnsID("example.test"), Type: acme.ChallengeHTTP01, Token: testToken,
				KeyAuthorization: testKeyAuth, AccountURI: testAccount,
			})
			checkResult(t, res, tc.want)
			if len(res.Record) != 1 {
				t.Errorf("want the http-01 attempt recorded, got %+v", res.Record)
			}
		})
	}
}

// TestValidateWildcardCAA proves a wildcard dns-01 attempt is checked
// against issuewild.
func TestValidateWildcardCAA(t *testing.T) {
	t.Parallel()
	d := newTestDNS(t)
	d.add(t,
		`_acme-challenge.example.test. TXT "`+txtDigest(testKeyAuth)+`"`,
		`example.test. CAA 0 issue "hallmark.test"`,
		`example.test. CAA 0 issuewild ";"`,
	)
	v := New(testConfig(d))
	req := Request{Identifier: dnsID("example.test"), Type: acme.ChallengeDNS01, Token: testToken, KeyAuthorization: testKeyAuth, AccountURI: testAccount}
	checkResult(t, v.Validate(t.Context(), req), "")
	req.Wildcard = true
	checkResult(t, v.Validate(t.Context(), req), acme.ProblemCAA, "*.example.test", "issuewild")
}

// TestAttemptJSON pins the field names the worker stores with a challenge.
func TestAttemptJSON(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(Attempt{URL: "http://example.test/x", Hostname: "example.test", Port: 80,
		AddressesResolved: []string{"127.0.0.1"}, AddressUsed: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"url":"http://example.test/x","hostname":"example.test","port":80,"addressesResolved":["127.0.0.1"],"addressUsed":"127.0.0.1"}`
	if string(b) != want {
		t.Fatalf("got %s\nwant %s", b, want)
	}
	if strings.Contains(string(b), "serverName") {
		t.Fatal("empty fields must be omitted")
	}
}
