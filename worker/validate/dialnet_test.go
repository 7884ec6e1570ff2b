package validate

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/worker/workerconf"
)

// secretReply is what a refused listener would answer: it must never
// appear in a problem, since no byte from a refused address is read.
const secretReply = "ami-id: i-0secretmetadata"

// acceptCounter is a listener that counts the connections it accepts and
// answers each with an HTTP response carrying secretReply.
type acceptCounter struct {
	addr string
	n    atomic.Int64
}

func countAccepts(t *testing.T, addr, reply string) *acceptCounter {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	c := &acceptCounter{addr: ln.Addr().String()}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.n.Add(1)
			go func() {
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
				fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(reply), reply)
				_, _ = conn.Read(make([]byte, 4096))
			}()
		}
	}()
	return c
}

// wantAccepts fails unless the listener accepted n connections (waiting a
// little for the accept loop to count them).
func (c *acceptCounter) wantAccepts(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	if n == 0 {
		deadline = time.Now().Add(100 * time.Millisecond)
	}
	for c.n.Load() < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n == 0 {
		time.Sleep(time.Until(deadline))
	}
	if got := c.n.Load(); got != n {
		t.Errorf("%s accepted %d connections, want %d", c.addr, got, n)
	}
}

// TestHTTP01DialPolicy: http-01 never connects where the dial policy
// refuses, on the first request or any redirect, and says which rule
// refused it. Refused listeners on 127.9.0.2 and 127.0.0.3 count what
// reaches them: nothing does. Without the rule the same redirect is
// followed and its reply quoted, which is what outside testers found.
func TestHTTP01DialPolicy(t *testing.T) {
	t.Parallel()
	deny := []string{"127.9.0.0/16"}
	redirect := func(target string) func(int) http.Handler {
		return func(port int) http.Handler {
			return redirectTo("http://" + target + ":" + strconv.Itoa(port) + "/latest/meta-data/")
		}
	}
	tests := []struct {
		name      string
		serve     func(port int) http.Handler // on 127.0.0.1; nil: nothing listens there
		dns       []string
		deny      []string
		listeners func(port int) []workerconf.Listener
		id        acme.Identifier
		denied    []string // addresses where a counting listener runs on the port
		accepts   int64    // what each of them accepts
		want      acme.ProblemType
		mentions  []string
		refused   []string // the last hop's AddressesRefused
	}{
		{name: "redirect to a denied address", serve: redirect("127.9.0.2"), dns: []string{"example.test. A 127.0.0.1"}, deny: deny,
			id: dnsID("example.test"), denied: []string{"127.9.0.2"}, want: acme.ProblemConnection,
			mentions: []string{"Fetching http://127.9.0.2:", "/latest/meta-data/", "refused to connect: 127.9.0.2 is in policy.deny_ip_ranges 127.9.0.0/16"},
			refused:  []string{"127.9.0.2"}},
		{name: "the same redirect without the rule is followed", serve: redirect("127.9.0.2"), dns: []string{"example.test. A 127.0.0.1"},
			id: dnsID("example.test"), denied: []string{"127.9.0.2"}, accepts: 1, want: acme.ProblemUnauthorized, mentions: []string{secretReply}},
		{name: "redirect to a name with a denied address", serve: redirect("meta.test"), dns: []string{"example.test. A 127.0.0.1", "meta.test. A 127.9.0.2"}, deny: deny,
			id: dnsID("example.test"), denied: []string{"127.9.0.2"}, want: acme.ProblemConnection,
			mentions: []string{"Fetching http://meta.test:", "127.9.0.2 is in policy.deny_ip_ranges 127.9.0.0/16"}, refused: []string{"127.9.0.2"}},
		{name: "redirect to the CA's own listener", serve: redirect("127.0.0.3"), dns: []string{"example.test. A 127.0.0.1"},
			listeners: func(port int) []workerconf.Listener {
				return []workerconf.Listener{{Key: "admin.listen", Addr: "127.0.0.3:" + strconv.Itoa(port)}}
			},
			id: dnsID("example.test"), denied: []string{"127.0.0.3"}, want: acme.ProblemConnection,
			mentions: []string{"is the CA's own listener (admin.listen)", "challenge.allow_reserved_ranges"}, refused: []string{"127.0.0.3"}},
		{name: "identifier resolving to a denied address", dns: []string{"evil.test. A 127.9.0.2"}, deny: deny,
			id: dnsID("evil.test"), denied: []string{"127.9.0.2"}, want: acme.ProblemConnection,
			mentions: []string{"127.9.0.2 is in policy.deny_ip_ranges"}, refused: []string{"127.9.0.2"}},
		{name: "every address refused", dns: []string{"evil.test. A 127.9.0.2", "evil.test. A 127.9.0.3"}, deny: deny,
			id: dnsID("evil.test"), denied: []string{"127.9.0.2", "127.9.0.3"}, want: acme.ProblemConnection,
			mentions: []string{"refused to connect to every address of evil.test: 127.9.0.2 is in policy.deny_ip_ranges 127.9.0.0/16; 127.9.0.3 is in"},
			refused:  []string{"127.9.0.2", "127.9.0.3"}},
		{name: "IP identifier denied", deny: deny, id: ipID("127.9.0.2"), denied: []string{"127.9.0.2"}, want: acme.ProblemRejectedIdentifier,
			mentions: []string{"127.9.0.2 is in policy.deny_ip_ranges 127.9.0.0/16"}, refused: []string{"127.9.0.2"}},
		{name: "a denied address is skipped for an allowed one", serve: func(int) http.Handler { return respond(200, testKeyAuth) },
			dns: []string{"mixed.test. A 127.9.0.2", "mixed.test. A 127.0.0.1"}, deny: deny,
			id: dnsID("mixed.test"), denied: []string{"127.9.0.2"}, refused: []string{"127.9.0.2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := newTestDNS(t)
			d.add(t, tc.dns...)
			cfg := testConfig(d)
			port := cfg.HTTPPort
			if tc.serve != nil {
				var h http.Handler
				port = serveHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }), false)
				h = tc.serve(port)
			}
			cfg.HTTPPort = port
			var counters []*acceptCounter
			for _, a := range tc.denied {
				counters = append(counters, countAccepts(t, net.JoinHostPort(a, strconv.Itoa(port)), secretReply))
			}
			cfg.Dial = DialRules{Deny: prefixes(t, tc.deny...)}
			if tc.listeners != nil {
				cfg.Dial.Listeners = tc.listeners(port)
			}
			res := New(cfg).Validate(t.Context(), Request{
				Identifier: tc.id, Type: acme.ChallengeHTTP01, Token: testToken, KeyAuthorization: testKeyAuth, AccountURI: testAccount,
			})
			if res.Problem != nil {
				t.Logf("%s: %s", res.Problem.Type, res.Problem.Detail)
			}
			checkResult(t, res, tc.want, tc.mentions...)
			if tc.accepts == 0 && res.Problem != nil && strings.Contains(res.Problem.Detail, secretReply) {
				t.Errorf("the problem quotes the refused listener's reply: %s", res.Problem.Detail)
			}
			for _, c := range counters {
				c.wantAccepts(t, tc.accepts)
			}
			last := res.Record[len(res.Record)-1]
			if !slices.Equal(last.AddressesRefused, tc.refused) {
				t.Errorf("record %+v, want addressesRefused %v", last, tc.refused)
			}
			if tc.refused != nil && tc.want != "" && last.AddressUsed != "" {
				t.Errorf("record %+v names an address used, but none may be", last)
			}
		})
	}
}

// TestHTTP01RedirectCodes: only 301, 302, 307 and 308 are followed (BR
// 3.2.2.4.19); a 303 or 300 fails the challenge without a request to its
// Location.
func TestHTTP01RedirectCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code   int
		follow bool
	}{{301, true}, {302, true}, {307, true}, {308, true}, {303, false}, {300, false}} {
		t.Run(strconv.Itoa(tc.code), func(t *testing.T) {
			t.Parallel()
			d := newTestDNS(t)
			d.host(t, "example.test")
			cfg := testConfig(d)
			var targetHits atomic.Int64
			cfg.HTTPPort = serveHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/target" {
					targetHits.Add(1)
					fmt.Fprint(w, testKeyAuth)
					return
				}
				http.Redirect(w, r, "/target", tc.code)
			}), false)
			res := New(cfg).Validate(t.Context(), Request{
				Identifier: dnsID("example.test"), Type: acme.ChallengeHTTP01, Token: testToken, KeyAuthorization: testKeyAuth,
			})
			if tc.follow {
				checkResult(t, res, "")
				if targetHits.Load() != 1 {
					t.Errorf("the redirect target was fetched %d times, want 1", targetHits.Load())
				}
				return
			}
			checkResult(t, res, acme.ProblemUnauthorized, fmt.Sprintf("HTTP status %d", tc.code), "only 301, 302, 307 and 308 redirects are followed")
			if targetHits.Load() != 0 {
				t.Errorf("a %d was followed: the target was fetched %d times", tc.code, targetHits.Load())
			}
		})
	}
}

// TestTLSALPN01DialPolicy: tls-alpn-01 obeys the same dial policy, for an
// IP identifier (rejectedIdentifier) and for a name's address (connection).
func TestTLSALPN01DialPolicy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		id       acme.Identifier
		deny     []string
		accepts  int64
		want     acme.ProblemType
		mentions []string
	}{
		{name: "IP identifier denied", id: ipID("127.9.0.2"), deny: []string{"127.9.0.0/16"}, want: acme.ProblemRejectedIdentifier,
			mentions: []string{"Connecting to 127.9.0.2 on port", "127.9.0.2 is in policy.deny_ip_ranges 127.9.0.0/16"}},
		{name: "name resolving to a denied address", id: dnsID("evil.test"), deny: []string{"127.9.0.2/32"}, want: acme.ProblemConnection,
			mentions: []string{"Connecting to evil.test on port", "127.9.0.2 is in policy.deny_ip_ranges 127.9.0.2/32"}},
		{name: "without the rule it connects", id: dnsID("evil.test"), accepts: 1, want: acme.ProblemTLS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := newTestDNS(t)
			d.add(t, "evil.test. A 127.9.0.2")
			cfg := testConfig(d)
			c := countAccepts(t, "127.9.0.2:0", secretReply)
			cfg.TLSALPNPort = portOf(t, c.addr)
			cfg.Dial = DialRules{Deny: prefixes(t, tc.deny...)}
			res := New(cfg).Validate(t.Context(), Request{
				Identifier: tc.id, Type: acme.ChallengeTLSALPN01, Token: testToken, KeyAuthorization: testKeyAuth,
			})
			checkResult(t, res, tc.want, tc.mentions...)
			c.wantAccepts(t, tc.accepts)
			if tc.accepts == 0 && (len(res.Record) != 1 || !slices.Equal(res.Record[0].AddressesRefused, []string{"127.9.0.2"})) {
				t.Errorf("record %+v, want 127.9.0.2 refused", res.Record)
			}
		})
	}
}
