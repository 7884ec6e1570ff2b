package access

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/tests/testdns"
)

func rdnsFacts(addr string) *Facts {
	return &Facts{Client: Client{Addr: netip.MustParseAddr(addr)}}
}

// TestRDNSCheck: PTR names from a real DNS server on loopback: a
// forward-confirmed name that matches allow passes; one that does not
// resolve back does not; deny wins across every PTR name; a server that
// fails makes the answer unknown.
func TestRDNSCheck(t *testing.T) {
	t.Parallel()
	srv := testdns.Start(t)
	srv.SetPTR("192.0.2.10", "ws10.lab.test")
	srv.SetAddrs("ws10.lab.test", "192.0.2.10")
	srv.SetPTR("192.0.2.11", "spoofed.lab.test") // A 127.0.0.1, the default: not confirmed
	srv.SetPTR("192.0.2.12", "ws12.lab.test", "ws12.guest.lab.test")
	srv.SetAddrs("ws12.lab.test", "192.0.2.12")
	srv.SetPTR("192.0.2.13", "host.elsewhere.test")
	srv.SetAddrs("host.elsewhere.test", "192.0.2.13")
	srv.SetPTR("192.0.2.14", "ws14.lab.test")
	srv.ServFail("ws14.lab.test")
	srv.ServFail("15.2.0.192.in-addr.arpa")
	srv.SetPTR("2001:db8::10", "v6.lab.test")
	srv.SetAddrs("v6.lab.test", "2001:db8::10")

	cfg := Config{Resolvers: []string{srv.Addr}}
	c := newRDNSCheck(cfg, Check{Allow: []string{"*.lab.test"}, Deny: []string{"*.guest.lab.test"}})
	ctx := context.Background()
	for _, tc := range []struct {
		addr string
		want Answer
		why  string
	}{
		{"192.0.2.10", Yes, "ws10.lab.test, forward-confirmed"},
		{"192.0.2.11", No, "does not resolve back"},
		{"192.0.2.12", No, "matches deny"},
		{"192.0.2.13", No, "matches allow"},
		{"192.0.2.14", Unknown, "looking it up again failed"},
		{"192.0.2.15", Unknown, "failed"},
		{"192.0.2.16", No, "has no PTR name"},
		{"2001:db8::10", Yes, "v6.lab.test"},
	} {
		got := c.check(ctx, rdnsFacts(tc.addr))
		if got.Answer != tc.want || !strings.Contains(got.Detail, tc.why) {
			t.Errorf("%s: %s (%s), want %s (%s)", tc.addr, got.Answer, got.Detail, tc.want, tc.why)
		}
	}
	// Without forward confirmation, the spoofed name passes: the setting
	// is what refuses it above.
	off := false
	lax := newRDNSCheck(cfg, Check{Allow: []string{"*.lab.test"}, ForwardConfirm: &off})
	if got := lax.check(ctx, rdnsFacts("192.0.2.11")); got.Answer != Yes {
		t.Errorf("forward_confirm off: %s (%s), want yes", got.Answer, got.Detail)
	}
}

// TestRDNSBudgetAndCache: a resolver that never answers makes the check
// unknown within its timeout (the time is not asserted: the answer is), and
// an answer is kept for its TTL: the second lookup asks nothing.
func TestRDNSBudgetAndCache(t *testing.T) {
	t.Parallel()
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	c := newRDNSCheck(Config{}, Check{Resolvers: []string{silent.LocalAddr().String()}, TimeoutMS: 200})
	if got := c.check(context.Background(), rdnsFacts("192.0.2.10")); got.Answer != Unknown || !strings.Contains(got.Detail, "time budget 200ms") {
		t.Errorf("silent resolver: %s (%s), want unknown", got.Answer, got.Detail)
	}

	srv := testdns.Start(t)
	srv.SetTTL(60)
	srv.SetPTR("192.0.2.20", "ws20.lab.test")
	srv.SetAddrs("ws20.lab.test", "192.0.2.20")
	cached := newRDNSCheck(Config{}, Check{Resolvers: []string{srv.Addr}, Allow: []string{"*.lab.test"}})
	for range 3 {
		if got := cached.check(context.Background(), rdnsFacts("192.0.2.20")); got.Answer != Yes {
			t.Fatalf("%s (%s)", got.Answer, got.Detail)
		}
	}
	if n := srv.Queries("20.2.0.192.in-addr.arpa"); n != 1 {
		t.Errorf("3 checks within the TTL asked the PTR %d times, want 1", n)
	}
	// With TTL 0 (and a cache of 0 s), every check asks again.
	srv.SetTTL(0)
	srv.SetPTR("192.0.2.21", "ws21.lab.test")
	srv.SetAddrs("ws21.lab.test", "192.0.2.21")
	for range 2 {
		cached.check(context.Background(), rdnsFacts("192.0.2.21"))
	}
	if n := srv.Queries("21.2.0.192.in-addr.arpa"); n != 2 {
		t.Errorf("2 checks of a TTL 0 answer asked the PTR %d times, want 2", n)
	}
}
