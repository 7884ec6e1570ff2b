package access

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

func mustNew(t *testing.T, cfg Config, opts Options) *Policy {
	t.Helper()
	p, err := New(cfg, opts)
	if err != nil || p == nil {
		t.Fatalf("New: %v, %v", p, err)
	}
	return p
}

func dns(names ...string) []acme.Identifier {
	var out []acme.Identifier
	for _, n := range names {
		out = append(out, acme.Identifier{Type: acme.IdentifierDNS, Value: n})
	}
	return out
}

func bound(id, label string) *Account {
	return &Account{ID: "acct1", EAB: func(context.Context) (*EAB, error) {
		if id == "" {
			return nil, nil
		}
		return &EAB{KeyID: id, Label: label}, nil
	}}
}

// stagedPolicy: the office may order names under lab.test; a bound team
// account may order anything; everyone else is refused.
func stagedPolicy() Config {
	return Config{
		Default: "deny", DefaultMessage: "not from here",
		Checks: map[string]Check{
			"office": {Kind: "cidr", Ranges: []string{"192.0.2.0/24"}},
			"names":  {Kind: "identifiers", Allow: []string{"*.lab.test"}},
			"team":   {Kind: "eab", KeyLabels: []string{"team-*"}},
		},
		Rules: []Rule{
			{Name: "outsiders", When: "not office", Action: "deny", Message: "outside the office"},
			{Name: "teams", When: "team", Action: "allow"},
			{Name: "lab-names", When: "names", Action: "allow"},
			{Name: "other-names", When: "not names", Action: "deny", Problem: "rejectedIdentifier", Message: "lab.test only"},
		},
	}
}

// TestStages: a request is decided as early as what it has shown allows,
// left pending while the deciding rule needs more, and a rule naming what
// the request never shows is skipped.
func TestStages(t *testing.T) {
	t.Parallel()
	p := mustNew(t, stagedPolicy(), Options{})
	ctx := context.Background()
	office, outside := netip.MustParseAddr("192.0.2.9"), netip.MustParseAddr("198.51.100.9")

	// Outside the office: refused before anything else is known.
	e := p.Start("new_order", KindOrder, outside, nil)
	if d := e.Decide(ctx); d.Verdict != Deny || d.Rule != "outsiders" || d.Message != "outside the office" {
		t.Errorf("outside: %+v, want deny by outsiders", d)
	}

	// From the office, a newOrder waits for the account, then for its names.
	e = p.Start("new_order", KindOrder, office, nil)
	if d := e.Decide(ctx); d.Verdict != Pending || d.Rule != "teams" {
		t.Errorf("office before the account: %+v, want pending on teams", d)
	}
	e.SetAccount(bound("", ""))
	if d := e.Decide(ctx); d.Verdict != Pending || d.Rule != "lab-names" {
		t.Errorf("office, unbound account: %+v, want pending on lab-names", d)
	}
	e.SetOrder(dns("www.elsewhere.test"), "default")
	d := e.Decide(ctx)
	if d.Verdict != Deny || d.Rule != "other-names" || d.Problem != ProblemRejectedIdentifier {
		t.Errorf("office, foreign name: %+v, want rejectedIdentifier by other-names", d)
	}
	var ae *acme.Error
	if err := d.Err(); !errors.As(err, &ae) || ae.Problem.Type != acme.ProblemRejectedIdentifier || ae.Problem.Detail != "lab.test only" {
		t.Errorf("its error: %v", err)
	}
	if again := e.Decide(ctx); again.Rule != d.Rule {
		t.Errorf("a decision changed: %+v then %+v", d, again)
	}

	// A bound team account is decided at the account stage.
	e = p.Start("new_order", KindOrder, office, nil)
	e.SetAccount(bound("kid1", "team-web"))
	if d := e.Decide(ctx); d.Verdict != Allow || d.Rule != "teams" {
		t.Errorf("team account: %+v, want allow by teams", d)
	}

	// A challenge POST never shows identifiers: the names rules are
	// skipped and the default decides.
	e = p.Start("challenge", KindAccount, office, nil)
	e.SetAccount(bound("", ""))
	if d := e.Decide(ctx); d.Verdict != Deny || d.Rule != "default" || d.Message != "not from here" {
		t.Errorf("challenge, unbound: %+v, want deny by default", d)
	}
	// newAccount shows no account either: the team rule is skipped too.
	e = p.Start("new_account", KindNewAccount, office, nil)
	if d := e.Decide(ctx); d.Verdict != Deny || d.Rule != "default" {
		t.Errorf("newAccount: %+v, want deny by default", d)
	}
	// revokeCert signed by the certificate's key: no account.
	e = p.Start("revoke_cert", KindRevoke, office, nil)
	if d := e.Decide(ctx); d.Verdict != Pending {
		t.Errorf("revokeCert before its signer is known: %+v, want pending", d)
	}
	e.SetAccount(nil)
	if d := e.Decide(ctx); d.Verdict != Deny || d.Rule != "default" {
		t.Errorf("revokeCert by the certificate key: %+v, want deny by default", d)
	}
}

// TestUnknownDecidesNothing: a rule that depends on a check that could not
// answer makes the request unavailable, never refused and never allowed;
// one that does not depend on it (an or already true) decides as usual.
func TestUnknownDecidesNothing(t *testing.T) {
	t.Parallel()
	cfg := Config{
		Checks: map[string]Check{
			"office": {Kind: "cidr", Ranges: []string{"192.0.2.0/24"}},
			"broken": {Kind: "hook", Command: []string{"/bin/sh", "-c", "exit 7"}, On: "request"},
		},
		Rules: []Rule{
			{When: "office or broken", Action: "allow"},
			{When: "broken", Action: "deny"},
		},
	}
	p := mustNew(t, cfg, Options{})
	ctx := context.Background()
	if d := p.Start("new_account", KindNewAccount, netip.MustParseAddr("192.0.2.1"), nil).Decide(ctx); d.Verdict != Allow {
		t.Errorf("office or broken, from the office: %+v, want allow", d)
	}
	d := p.Start("new_account", KindNewAccount, netip.MustParseAddr("198.51.100.1"), nil).Decide(ctx)
	if d.Verdict != Unavailable || d.Rule != "rule 1" || len(d.Unknown) != 1 || !strings.Contains(d.Unknown[0], "broken: hook /bin/sh exited 7") {
		t.Fatalf("office or broken, from elsewhere: %+v, want unavailable naming broken", d)
	}
	if err := d.Err(); !errors.Is(err, ErrUnknown) {
		t.Errorf("its error %v is not ErrUnknown", err)
	}
}

// TestWarnAndHeaders: mode warn is reported to the caller, and the client
// checked is the one trusted proxies name.
func TestWarnAndHeaders(t *testing.T) {
	t.Parallel()
	cfg := Config{Mode: "warn", TrustedProxies: []string{"127.0.0.2/32"},
		Checks: map[string]Check{"lab": {Kind: "cidr", Ranges: []string{"127.0.0.1/32"}}},
		Rules:  []Rule{{When: "not lab", Action: "deny", Message: "lab only"}}}
	p := mustNew(t, cfg, Options{})
	if !p.Warn() {
		t.Error("mode warn is not reported")
	}
	h := http.Header{"X-Forwarded-For": {"127.0.0.1"}}
	ctx := context.Background()
	if d := p.Start("new_account", KindNewAccount, netip.MustParseAddr("127.0.0.2"), h).Decide(ctx); d.Verdict != Allow {
		t.Errorf("through the trusted proxy: %+v, want allow", d)
	}
	if d := p.Start("new_account", KindNewAccount, netip.MustParseAddr("127.0.0.3"), h).Decide(ctx); d.Verdict != Deny {
		t.Errorf("through an untrusted proxy: %+v, want deny", d)
	}
}

// TestIdentifierMatching: globs, regexes, ranges, deny lists and profiles.
func TestIdentifierMatching(t *testing.T) {
	t.Parallel()
	c := newIdentifiersCheck(Check{Allow: []string{"*.lab.test", "web-*.corp.test"}, Deny: []string{"secret.lab.test"},
		Regex: []string{`host[0-9]+\.dc\.test`}, IPRanges: []string{"10.0.0.0/8"}, DenyIPRanges: []string{"10.9.0.0/16"}, Profiles: []string{"default"}})
	ip := func(v string) acme.Identifier { return acme.Identifier{Type: acme.IdentifierIP, Value: v} }
	for _, tc := range []struct {
		ids     []acme.Identifier
		profile string
		want    Answer
	}{
		{dns("a.lab.test", "a.b.lab.test"), "default", Yes},
		{dns("lab.test"), "default", No}, // "*." is one label or more
		{dns("*.x.lab.test"), "default", Yes},
		{dns("secret.lab.test"), "default", No},
		{dns("web-1.corp.test"), "default", Yes},
		{dns("web.corp.test"), "default", No},
		{dns("host12.dc.test"), "default", Yes},
		{dns("xhost12.dc.test"), "default", No}, // a regex matches the whole name
		{[]acme.Identifier{ip("10.1.2.3")}, "default", Yes},
		{[]acme.Identifier{ip("10.9.2.3")}, "default", No},
		{[]acme.Identifier{ip("192.0.2.1")}, "default", No},
		{dns("a.lab.test", "a.elsewhere.test"), "default", No},
		{dns("a.lab.test"), "short", No},
	} {
		if got := c.check(context.Background(), &Facts{Identifiers: tc.ids, Profile: tc.profile}); got.Answer != tc.want {
			t.Errorf("%v (%s): %s (%s), want %s", tc.ids, tc.profile, got.Answer, got.Detail, tc.want)
		}
	}
	// A deny-only check lets every other identifier through, of any type.
	d := newIdentifiersCheck(Check{Deny: []string{"*.evil.test"}})
	if got := d.check(context.Background(), &Facts{Identifiers: append(dns("ok.test"), ip("192.0.2.1"))}); got.Answer != Yes {
		t.Errorf("deny-only: %s (%s)", got.Answer, got.Detail)
	}
}

// TestEABCheck: the binding's key id and label, read through the account;
// a failed read is unknown.
func TestEABCheck(t *testing.T) {
	t.Parallel()
	c := eabCheck{ids: []string{"k1", "k2"}, labels: []string{"team-*"}}
	ctx := context.Background()
	for _, tc := range []struct {
		acct *Account
		want Answer
	}{
		{bound("k1", "team-web"), Yes},
		{bound("k3", "team-web"), No},
		{bound("k2", "guest"), No},
		{bound("", ""), No},
		{nil, No},
		{&Account{ID: "a", EAB: func(context.Context) (*EAB, error) { return nil, errors.New("database down") }}, Unknown},
	} {
		if got := c.check(ctx, &Facts{Account: tc.acct}); got.Answer != tc.want {
			t.Errorf("%+v: %s (%s), want %s", tc.acct, got.Answer, got.Detail, tc.want)
		}
	}
}
