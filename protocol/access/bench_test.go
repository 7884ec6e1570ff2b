package access

import (
	"context"
	"net/http"
	"net/netip"
	"testing"

	"github.com/hallmark-ca/hallmark/tests/testdns"
)

// BenchmarkDecide is the policy's cost on a newOrder that goes through
// every stage: a client behind a trusted proxy, a cidr check, a cached
// forward-confirmed PTR, an eab check and an identifiers check.
func BenchmarkDecide(b *testing.B) {
	srv := testdns.Start(b)
	srv.SetTTL(300)
	srv.SetPTR("192.0.2.9", "ws9.lab.test")
	srv.SetAddrs("ws9.lab.test", "192.0.2.9")
	cfg := stagedPolicy()
	cfg.TrustedProxies = []string{"10.0.0.0/8"}
	cfg.Resolvers = []string{srv.Addr}
	cfg.Checks["ptr"] = Check{Kind: "rdns", Allow: []string{"*.lab.test"}}
	cfg.Rules = append([]Rule{{When: "not ptr", Action: "deny"}}, cfg.Rules...)
	p, err := New(cfg, Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	h := http.Header{"X-Forwarded-For": {"192.0.2.9"}}
	peer := netip.MustParseAddr("10.0.0.2")
	acct, ids := bound("", ""), dns("www.lab.test", "api.lab.test")
	b.ReportAllocs()
	for b.Loop() {
		e := p.Start("new_order", KindOrder, peer, h)
		e.Decide(ctx)
		e.SetAccount(acct)
		e.Decide(ctx)
		e.SetOrder(ids, "default")
		if d := e.Decide(ctx); d.Verdict != Allow {
			b.Fatalf("%+v", d)
		}
	}
}
