package validate

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

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

// udpResolver runs a resolver on loopback UDP whose answers come from
// answer (nil: drop the query); each query is handled on its own
// goroutine, so a slow answer holds up no other.
func udpResolver(t *testing.T, answer func(q dns.Question, n int) (delay time.Duration, ok bool)) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	asked := map[dns.Question]int{}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		q := req.Question[0]
		mu.Lock()
		asked[q]++
		n := asked[q]
		mu.Unlock()
		delay, ok := answer(q, n)
		if !ok {
			return
		}
		time.Sleep(delay)
		m := new(dns.Msg)
		m.SetReply(req)
		if q.Qtype == dns.TypeTXT {
			rr, _ := dns.NewRR(q.Name + ` 60 IN TXT "` + txtDigest(testKeyAuth) + `"`)
			m.Answer = append(m.Answer, rr)
		}
		_ = w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String()
}

// TestUDPQueryBoundAndResend: one query to one resolver may take
// dnsExchangeTimeout (5 s), not miekg/dns's 2 s default read timeout, and
// a datagram lost on the way is sent again within that time instead of
// failing the challenge. Resends keep the query's ID on the query's own
// socket, so the late answer to the first send of a resolver slower than a
// send's share of the time is taken (with a fresh ID per send it would be
// thrown away, and the later sends' answers come too late).
func TestUDPQueryBoundAndResend(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		answer func(q dns.Question, n int) (time.Duration, bool)
		within time.Duration
	}{
		{"every answer after 3.5 s", func(dns.Question, int) (time.Duration, bool) { return 3500 * time.Millisecond, true }, dnsExchangeTimeout},
		{"the first datagram of each question lost", func(_ dns.Question, n int) (time.Duration, bool) { return 0, n > 1 }, dnsExchangeTimeout / 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := Config{Resolvers: []string{udpResolver(t, tc.answer)}, Timeout: 10 * time.Second, CAAIdentities: []string{testCAA}}
			start := time.Now()
			res := New(cfg).Validate(t.Context(), Request{
				Identifier: dnsID("example.test"), Type: acme.ChallengeDNS01, Token: testToken, KeyAuthorization: testKeyAuth, AccountURI: testAccount,
			})
			checkResult(t, res, "")
			if took := time.Since(start); took > tc.within {
				t.Errorf("took %v, want under %v", took, tc.within)
			}
		})
	}
}

// stalledIPv6 binds [::1]:port with an accept queue of one and fills it,
// so that further connection attempts there get no answer at all (their
// SYNs are dropped), as at an IPv6 address that is blackholed. It skips the
// test where that cannot be arranged (no IPv6 loopback).
func stalledIPv6(t *testing.T, port int) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET6, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Skipf("no IPv6 socket: %v", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet6{Port: port, Addr: netip.IPv6Loopback().As16()}); err != nil {
		t.Skipf("cannot bind [::1]:%d: %v", port, err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("::1", strconv.Itoa(port))
	for range 3 {
		if c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond); err == nil {
			t.Cleanup(func() { c.Close() })
		}
	}
	if c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond); err == nil {
		c.Close()
		t.Skip("could not make [::1] drop connection attempts")
	}
}

// TestDialIPv6ThenIPv4: a name with AAAA and A records is tried at its
// IPv6 address first and, when that fails, at its IPv4 address (as
// Boulder does). An IPv6 address that never answers gets only half of the
// time left, so IPv4 is still tried; before, it took all of it and IPv4
// was never tried. The record and the problem name the address that was
// used or failed, and the record lists the IPv6 address tried before.
func TestDialIPv6ThenIPv4(t *testing.T) {
	t.Parallel()
	const (
		answers = "answers"
		refuses = "refuses" // nothing listens
		stalls  = "stalls"  // drops connection attempts
	)
	tests := []struct {
		name     string
		typ      acme.ChallengeType
		v6, v4   string
		used     string
		tried    []string
		want     acme.ProblemType
		mentions []string
	}{
		{name: "IPv6 answers", typ: acme.ChallengeHTTP01, v6: answers, v4: refuses, used: "::1"},
		{name: "IPv6 refuses, IPv4 answers", typ: acme.ChallengeHTTP01, v6: refuses, v4: answers, used: "127.0.0.1", tried: []string{"::1"}},
		{name: "IPv6 stalls, IPv4 answers", typ: acme.ChallengeHTTP01, v6: stalls, v4: answers, used: "127.0.0.1", tried: []string{"::1"}},
		{name: "IPv6 stalls, IPv4 answers tls-alpn-01", typ: acme.ChallengeTLSALPN01, v6: stalls, v4: answers, used: "127.0.0.1", tried: []string{"::1"}},
		{name: "IPv6 stalls, IPv4 refuses", typ: acme.ChallengeHTTP01, v6: stalls, v4: refuses, used: "127.0.0.1", tried: []string{"::1"},
			want: acme.ProblemConnection, mentions: []string{"127.0.0.1: Fetching", "Connection refused"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := newTestDNS(t)
			d.add(t, "dual.test. 60 IN AAAA ::1", "dual.test. 60 IN A 127.0.0.1")
			cfg := testConfig(d)
			cfg.Timeout = 2 * time.Second
			port := closedPort()
			if tc.v4 == answers {
				if tc.typ == acme.ChallengeTLSALPN01 {
					port = serveALPN(t, alpnCert{dnsNames: []string{"dual.test"}}.build(t), []string{acmeTLSProtocol}, "")
				} else {
					port = serveHTTP(t, respond(200, testKeyAuth), false)
				}
			}
			switch tc.v6 {
			case answers:
				ln, err := net.Listen("tcp", net.JoinHostPort("::1", strconv.Itoa(port)))
				if err != nil {
					t.Skipf("no IPv6 loopback listener: %v", err)
				}
				s := &httptest.Server{Listener: ln, Config: &http.Server{Handler: respond(200, testKeyAuth)}}
				s.Start()
				t.Cleanup(s.Close)
			case stalls:
				stalledIPv6(t, port)
			}
			cfg.HTTPPort, cfg.TLSALPNPort = port, port
			res := New(cfg).Validate(t.Context(), Request{
				Identifier: dnsID("dual.test"), Type: tc.typ, Token: testToken, KeyAuthorization: testKeyAuth, AccountURI: testAccount,
			})
			checkResult(t, res, tc.want, tc.mentions...)
			if len(res.Record) != 1 || res.Record[0].AddressUsed != tc.used || !slices.Equal(res.Record[0].AddressesTried, tc.tried) {
				t.Fatalf("record %+v, want addressUsed %s after trying %v", res.Record, tc.used, tc.tried)
			}
		})
	}
}
