package validate

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// downResolver is a loopback UDP address where nothing listens (bound then
// released): a query there is refused (ICMP port unreachable), as when the
// CA's own resolver is down.
func downResolver(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close()
	return addr
}

// TestCouldNotRunIsNoVerdict: when no configured resolver can be asked at
// all (none configured, or every one refuses at the transport level: the
// CA's own resolvers are down), no check ran, so there is no verdict on the
// client's challenge: Result.Err is set and Problem is nil, and CheckCAA
// returns an error (never permission). Before, each of these was recorded
// as a terminal dns or serverInternal problem.
func TestCouldNotRunIsNoVerdict(t *testing.T) {
	t.Parallel()
	d := newTestDNS(t)
	d.add(t, `_acme-challenge.example.test. 60 IN TXT "`+txtDigest(testKeyAuth)+`"`)
	tests := []struct {
		name      string
		resolvers func(t *testing.T) []string
		want      error
	}{
		{"no resolvers", func(*testing.T) []string { return nil }, ErrNotConfigured},
		{"the one resolver is down", func(t *testing.T) []string { return []string{downResolver(t)} }, ErrResolversUnreachable},
		{"every resolver is down", func(t *testing.T) []string { return []string{downResolver(t), downResolver(t)} }, ErrResolversUnreachable},
	}
	for _, tc := range tests {
		for _, typ := range []acme.ChallengeType{acme.ChallengeHTTP01, acme.ChallengeDNS01, acme.ChallengeTLSALPN01} {
			t.Run(tc.name+"/"+string(typ), func(t *testing.T) {
				t.Parallel()
				cfg := testConfig(d)
				cfg.Resolvers = tc.resolvers(t)
				res := New(cfg).Validate(t.Context(), Request{
					Identifier: dnsID("example.test"), Type: typ, Token: testToken, KeyAuthorization: testKeyAuth, AccountURI: testAccount,
				})
				if res.Problem != nil {
					t.Fatalf("a verdict was given for a check that could not run: %s: %s", res.Problem.Type, res.Problem.Detail)
				}
				if !errors.Is(res.Err, tc.want) {
					t.Fatalf("Err = %v, want %v", res.Err, tc.want)
				}
			})
		}
		t.Run(tc.name+"/CAA", func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(d)
			cfg.Resolvers = tc.resolvers(t)
			p, err := New(cfg).CheckCAA(t.Context(), dnsID("example.test"), false, acme.ChallengeHTTP01, testAccount)
			if p != nil {
				t.Fatalf("a verdict was given for a check that could not run: %s: %s", p.Type, p.Detail)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v (never permission)", err, tc.want)
			}
		})
	}
}

// TestResolverFailuresAreVerdicts: a resolver that answers, whatever it
// answers, or that times out (a recursive resolver can, because of the
// client's own authoritative servers), gives a verdict; a resolver that is
// down is skipped when another one answers. CAA fails closed throughout.
func TestResolverFailuresAreVerdicts(t *testing.T) {
	t.Parallel()
	good := `_acme-challenge.example.test. 60 IN TXT "` + txtDigest(testKeyAuth) + `"`
	tests := []struct {
		name     string
		setup    func(d *testDNS)
		down     bool          // a down resolver is configured before the test's server
		timeout  time.Duration // Config.Timeout, when not the default of testConfig
		want     acme.ProblemType
		mentions []string
	}{
		{name: "down, then one that answers", down: true},
		{name: "down, then SERVFAIL", down: true, setup: func(d *testDNS) { d.rcode("_acme-challenge.example.test", 2) },
			want: acme.ProblemDNS, mentions: []string{"SERVFAIL"}},
		{name: "REFUSED", setup: func(d *testDNS) { d.rcode("_acme-challenge.example.test", 5) },
			want: acme.ProblemDNS, mentions: []string{"REFUSED"}},
		{name: "NXDOMAIN", setup: func(d *testDNS) { d.rcode("_acme-challenge.example.test", 3) },
			want: acme.ProblemDNS, mentions: []string{"NXDOMAIN"}},
		{name: "CAA SERVFAIL", setup: func(d *testDNS) { d.rcode("example.test", 2) },
			want: acme.ProblemDNS, mentions: []string{"While checking CAA", "SERVFAIL"}},
		{name: "down, then a timeout", down: true, timeout: time.Second, setup: func(d *testDNS) { d.blackhole("_acme-challenge.example.test") },
			want: acme.ProblemDNS, mentions: []string{"timed out"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := newTestDNS(t)
			d.add(t, good)
			if tc.setup != nil {
				tc.setup(d)
			}
			cfg := testConfig(d)
			if tc.down {
				cfg.Resolvers = []string{downResolver(t), d.Addr}
			}
			if tc.timeout != 0 {
				cfg.Timeout = tc.timeout
			}
			res := New(cfg).Validate(t.Context(), Request{
				Identifier: dnsID("example.test"), Type: acme.ChallengeDNS01, Token: testToken, KeyAuthorization: testKeyAuth, AccountURI: testAccount,
			})
			checkResult(t, res, tc.want, tc.mentions...)
		})
	}
}

// TestInterruptedIsNoVerdict: when the caller's context ends before
// Config.Timeout (the worker stops, the job times out), what the attempt
// saw so far is no verdict, for Validate and for CheckCAA.
func TestInterruptedIsNoVerdict(t *testing.T) {
	t.Parallel()
	d := newTestDNS(t)
	d.blackhole("_acme-challenge.example.test")
	d.blackhole("example.test")
	v := New(testConfig(d)) // Timeout 5s
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	res := v.Validate(ctx, Request{
		Identifier: dnsID("example.test"), Type: acme.ChallengeDNS01, Token: testToken, KeyAuthorization: testKeyAuth, AccountURI: testAccount,
	})
	if res.Problem != nil || !errors.Is(res.Err, context.DeadlineExceeded) {
		t.Fatalf("Validate: problem %+v, err %v; want no problem and the context's error", res.Problem, res.Err)
	}
	ctx, cancel = context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	p, err := v.CheckCAA(ctx, dnsID("example.test"), false, acme.ChallengeDNS01, testAccount)
	if p != nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CheckCAA: problem %+v, err %v; want no problem and the context's error", p, err)
	}
}
