package policy

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/profile"
)

func d(v string) acme.Identifier  { return acme.Identifier{Type: acme.IdentifierDNS, Value: v} }
func ip(v string) acme.Identifier { return acme.Identifier{Type: acme.IdentifierIP, Value: v} }

var (
	both     = profile.Profile{IdentifierTypes: []string{"dns", "ip"}, AllowWildcards: true}
	noWild   = profile.Profile{IdentifierTypes: []string{"dns", "ip"}}
	dnsOnly  = profile.Profile{IdentifierTypes: []string{"dns"}, AllowWildcards: true}
	openPol  = Config{MaxIdentifiers: 5}
	mappedPo = Config{AllowIPRanges: []string{"::ffff:10.0.0.0/104"}}
	strictPo = Config{
		AllowDomains:  []string{"example.com", "Corp.Test."},
		DenyDomains:   []string{"secret.example.com"},
		AllowIPRanges: []string{"10.0.0.0/8", "2001:db8::/32"},
		DenyIPRanges:  []string{"10.9.0.0/16"},
	}
)

func TestCheck(t *testing.T) {
	t.Parallel()
	name253 := strings.Repeat(strings.Repeat("a", 63)+".", 3) + strings.Repeat("a", 57) + ".com"
	tests := []struct {
		name    string
		pol     Config
		profile profile.Profile
		in      []acme.Identifier
		want    []acme.Identifier // on success
		problem acme.ProblemType  // "" means success
		detail  string
	}{
		{"valid names", openPol, both, []acme.Identifier{d("a.example.com"), d("b-1.example.org")}, []acme.Identifier{d("a.example.com"), d("b-1.example.org")}, "", ""},
		{"upper case normalised", openPol, both, []acme.Identifier{d("WWW.Example.COM")}, []acme.Identifier{d("www.example.com")}, "", ""},
		{"trailing dot", openPol, both, []acme.Identifier{d("example.com.")}, []acme.Identifier{d("example.com")}, "", ""},
		{"punycode", openPol, both, []acme.Identifier{d("xn--bcher-kva.example")}, []acme.Identifier{d("xn--bcher-kva.example")}, "", ""},
		{"non-ASCII in an A-label", openPol, both, []acme.Identifier{d("xn--ab-\u00e9.example")}, nil, acme.ProblemMalformed, "non-ASCII"},
		{"broken punycode", openPol, both, []acme.Identifier{d("xn--99999999999a.example")}, nil, acme.ProblemMalformed, "not a valid internationalized label"},
		{"punycode of a disallowed rune", openPol, both, []acme.Identifier{d("xn--a-ecp.example")}, nil, acme.ProblemMalformed, "not a valid internationalized label"},
		{"unicode", openPol, both, []acme.Identifier{d("bücher.example")}, nil, acme.ProblemMalformed, "punycode"},
		{"reserved hyphens", openPol, both, []acme.Identifier{d("ab--cd.example")}, nil, acme.ProblemMalformed, "reserved"},
		{"underscore", openPol, both, []acme.Identifier{d("_acme.example.com")}, nil, acme.ProblemMalformed, "letters, digits and hyphens"},
		{"leading hyphen", openPol, both, []acme.Identifier{d("-a.example.com")}, nil, acme.ProblemMalformed, "hyphen"},
		{"empty label", openPol, both, []acme.Identifier{d("a..example.com")}, nil, acme.ProblemMalformed, "empty label"},
		{"empty", openPol, both, []acme.Identifier{d("")}, nil, acme.ProblemMalformed, "empty"},
		{"label too long", openPol, both, []acme.Identifier{d(strings.Repeat("a", 64) + ".example.com")}, nil, acme.ProblemMalformed, "63"},
		{"label of 63 ok", openPol, both, []acme.Identifier{d(strings.Repeat("a", 63) + ".example.com")}, []acme.Identifier{d(strings.Repeat("a", 63) + ".example.com")}, "", ""},
		{"name too long", openPol, both, []acme.Identifier{d(strings.Repeat(strings.Repeat("a", 60)+".", 4) + "example.com")}, nil, acme.ProblemMalformed, "253"},
		// At the boundary: 253 characters is a name, 254 is not.
		{"name of 253 ok", openPol, both, []acme.Identifier{d(name253)}, []acme.Identifier{d(name253)}, "", ""},
		{"name of 254", openPol, both, []acme.Identifier{d("b" + name253)}, nil, acme.ProblemMalformed, "253"},
		{"trailing hyphen", openPol, both, []acme.Identifier{d("a-.example.com")}, nil, acme.ProblemMalformed, "hyphen"},
		{"single label", openPol, both, []acme.Identifier{d("localhost")}, nil, acme.ProblemMalformed, "single label"},
		{"IP-looking DNS name", openPol, both, []acme.Identifier{d("10.0.0.1")}, nil, acme.ProblemMalformed, "ip"},
		{"wildcard allowed", openPol, both, []acme.Identifier{d("*.Example.com")}, []acme.Identifier{d("*.example.com")}, "", ""},
		{"wildcard not allowed", openPol, noWild, []acme.Identifier{d("*.example.com")}, nil, acme.ProblemRejectedIdentifier, "wildcard"},
		{"wildcard in the middle", openPol, both, []acme.Identifier{d("a.*.example.com")}, nil, acme.ProblemMalformed, "wildcard"},
		{"partial wildcard label", openPol, both, []acme.Identifier{d("a*.example.com")}, nil, acme.ProblemMalformed, "wildcard"},
		{"bare star", openPol, both, []acme.Identifier{d("*")}, nil, acme.ProblemMalformed, "wildcard"},
		{"wildcard over a TLD", openPol, both, []acme.Identifier{d("*.com")}, nil, acme.ProblemMalformed, "wildcard"},
		{"IPv4", openPol, both, []acme.Identifier{ip("192.0.2.1")}, []acme.Identifier{ip("192.0.2.1")}, "", ""},
		{"IPv6 canonicalised", openPol, both, []acme.Identifier{ip("2001:DB8:0:0:0:0:0:1")}, []acme.Identifier{ip("2001:db8::1")}, "", ""},
		{"IPv4-mapped IPv6", openPol, both, []acme.Identifier{ip("::ffff:192.0.2.1")}, []acme.Identifier{ip("192.0.2.1")}, "", ""},
		{"loopback allowed", openPol, both, []acme.Identifier{ip("127.0.0.1")}, []acme.Identifier{ip("127.0.0.1")}, "", ""},
		{"bad IP", openPol, both, []acme.Identifier{ip("300.1.1.1")}, nil, acme.ProblemMalformed, "not an IPv4 or IPv6"},
		{"IP with zone", openPol, both, []acme.Identifier{ip("fe80::1%eth0")}, nil, acme.ProblemMalformed, "zone"},
		{"unspecified IP", openPol, both, []acme.Identifier{ip("0.0.0.0")}, nil, acme.ProblemRejectedIdentifier, "unspecified"},
		{"multicast IP", openPol, both, []acme.Identifier{ip("ff02::1")}, nil, acme.ProblemRejectedIdentifier, "multicast"},
		{"IP when profile is DNS-only", openPol, dnsOnly, []acme.Identifier{ip("192.0.2.1")}, nil, acme.ProblemUnsupportedIdentifier, "IP addresses"},
		{"IP when profile names no types", openPol, profile.Profile{}, []acme.Identifier{ip("192.0.2.1")}, nil, acme.ProblemUnsupportedIdentifier, "IP addresses"},
		{"DNS when profile is IP-only", openPol, profile.Profile{IdentifierTypes: []string{"ip"}}, []acme.Identifier{d("a.example.com")}, nil, acme.ProblemUnsupportedIdentifier, "DNS"},
		{"unknown type", openPol, both, []acme.Identifier{{Type: "email", Value: "a@example.com"}}, nil, acme.ProblemUnsupportedIdentifier, "email"},
		{"allow list suffix", strictPo, both, []acme.Identifier{d("a.b.example.com"), d("example.com"), d("x.corp.test")}, []acme.Identifier{d("a.b.example.com"), d("example.com"), d("x.corp.test")}, "", ""},
		{"allow list label boundary", strictPo, both, []acme.Identifier{d("evilexample.com")}, nil, acme.ProblemRejectedIdentifier, "only for names under"},
		{"deny wins over allow", strictPo, both, []acme.Identifier{d("a.secret.example.com")}, nil, acme.ProblemRejectedIdentifier, "forbids"},
		{"deny exact", strictPo, both, []acme.Identifier{d("secret.example.com")}, nil, acme.ProblemRejectedIdentifier, "forbids"},
		{"wildcard covering a denied name", strictPo, both, []acme.Identifier{d("*.example.com")}, nil, acme.ProblemRejectedIdentifier, "forbids"},
		{"wildcard over allowed base", strictPo, both, []acme.Identifier{d("*.corp.test")}, []acme.Identifier{d("*.corp.test")}, "", ""},
		{"CIDR allow", strictPo, both, []acme.Identifier{ip("10.1.2.3"), ip("2001:db8::5")}, []acme.Identifier{ip("10.1.2.3"), ip("2001:db8::5")}, "", ""},
		{"CIDR outside allow", strictPo, both, []acme.Identifier{ip("192.0.2.1")}, nil, acme.ProblemRejectedIdentifier, "10.0.0.0/8"},
		{"CIDR deny wins", strictPo, both, []acme.Identifier{ip("10.9.1.1")}, nil, acme.ProblemRejectedIdentifier, "10.9.0.0/16"},
		// A range written IPv4-mapped means its IPv4 range: ::ffff:10.0.0.0/104 is 10.0.0.0/8.
		{"IPv4-mapped CIDR allow", mappedPo, both, []acme.Identifier{ip("10.1.2.3"), ip("::ffff:10.4.5.6")}, []acme.Identifier{ip("10.1.2.3"), ip("10.4.5.6")}, "", ""},
		{"IPv4-mapped CIDR outside", mappedPo, both, []acme.Identifier{ip("11.0.0.1")}, nil, acme.ProblemRejectedIdentifier, "10.0.0.0/8"},
		{"duplicates removed", openPol, both, []acme.Identifier{d("a.example.com"), d("A.example.com."), ip("2001:db8::1"), ip("2001:DB8::1"), d("a.example.com")}, []acme.Identifier{d("a.example.com"), ip("2001:db8::1")}, "", ""},
		{"too many", openPol, both, []acme.Identifier{d("a1.example"), d("a2.example"), d("a3.example"), d("a4.example"), d("a5.example"), d("a6.example")}, nil, acme.ProblemRejectedIdentifier, "at most 5"},
		{"five after dedup is fine", openPol, both, []acme.Identifier{d("a1.example"), d("a2.example"), d("a3.example"), d("a4.example"), d("a5.example"), d("A5.example")}, []acme.Identifier{d("a1.example"), d("a2.example"), d("a3.example"), d("a4.example"), d("a5.example")}, "", ""},
		{"none", openPol, both, nil, nil, acme.ProblemMalformed, "at least one"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := New(tc.pol)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.Check(tc.in, tc.profile)
			if tc.problem == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
				return
			}
			var ae *acme.Error
			if !errors.As(err, &ae) {
				t.Fatalf("err %v is not an *acme.Error (got %v)", err, got)
			}
			if ae.Problem.Type != tc.problem || !strings.Contains(ae.Problem.Detail, tc.detail) {
				t.Fatalf("got %s %q, want %s containing %q", ae.Problem.Type, ae.Problem.Detail, tc.problem, tc.detail)
			}
			for _, sp := range ae.Problem.Subproblems {
				if sp.Identifier == nil {
					t.Fatalf("subproblem %+v has no identifier", sp)
				}
			}
		})
	}
}

func TestSeveralFailures(t *testing.T) {
	t.Parallel()
	p, err := New(strictPo)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   []acme.Identifier
		typ  acme.ProblemType
		subs map[string]acme.ProblemType
	}{
		{"all rejected", []acme.Identifier{d("a.example.com"), d("evil.test"), ip("192.0.2.1")}, acme.ProblemRejectedIdentifier,
			map[string]acme.ProblemType{"evil.test": acme.ProblemRejectedIdentifier, "192.0.2.1": acme.ProblemRejectedIdentifier}},
		{"all malformed", []acme.Identifier{d("a_b.example.com"), d("x..example.com")}, acme.ProblemMalformed,
			map[string]acme.ProblemType{"a_b.example.com": acme.ProblemMalformed, "x..example.com": acme.ProblemMalformed}},
		{"mixed is compound", []acme.Identifier{d("a_b.example.com"), d("evil.test"), {Type: "email", Value: "x@y"}}, acme.ProblemCompound,
			map[string]acme.ProblemType{"a_b.example.com": acme.ProblemMalformed, "evil.test": acme.ProblemRejectedIdentifier, "x@y": acme.ProblemUnsupportedIdentifier}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := p.Check(tc.in, both)
			ae := acme.AsError(err)
			if ae.Problem.Type != tc.typ {
				t.Fatalf("type %s, want %s (%v)", ae.Problem.Type, tc.typ, err)
			}
			got := map[string]acme.ProblemType{}
			for _, sp := range ae.Problem.Subproblems {
				got[sp.Identifier.Value] = sp.Type
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.subs) {
				t.Fatalf("subproblems %v, want %v", got, tc.subs)
			}
		})
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	for _, pol := range []Config{
		{AllowDomains: []string{""}},
		{DenyDomains: []string{"a_b.example"}},
		{AllowIPRanges: []string{"10.0.0.1"}},
		{DenyIPRanges: []string{"nope/8"}},
	} {
		if _, err := New(pol); err == nil {
			t.Errorf("New(%+v) succeeded", pol)
		}
	}
}

func TestDomainSyntax(t *testing.T) {
	t.Parallel()
	for name, ok := range map[string]bool{
		"hallmark.example": true, "Mail.Hallmark.Example": true, "xn--bcher-kva.example": true,
		"bücher.example": false, "xn--a.example": false, "mail_host.example": false, "*.example.com": false,
		"localhost": false, ".example.com": false, "example.com.": false, "-a.example": false, "a..example": false,
	} {
		if why := DomainSyntax(name); (why == "") != ok {
			t.Errorf("DomainSyntax(%q) = %q, want accepted %v", name, why, ok)
		}
	}
}
