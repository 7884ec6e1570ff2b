package unbound_test

import (
	"testing"

	"github.com/miekg/dns"

	"github.com/hallmark-ca/hallmark/tests/signeddns"
	"github.com/hallmark-ca/hallmark/tests/unbound"
)

// TestValidates: unbound, anchored at a zone signeddns signs, answers its
// names secure (AD), an unsigned zone's insecure (no AD), and a name whose
// signatures expired SERVFAIL with the Extended DNS Error for it, or a bare
// SERVFAIL without EDE; with checking disabled it answers all of them. So
// both harnesses do what the worker's DNSSEC tests take them for.
func TestValidates(t *testing.T) {
	secure := signeddns.NewZone("secure.test.", true)
	secure.Add("www 60 IN A 127.0.0.1", "www 60 IN TXT hello", "bad 60 IN TXT forged")
	secure.Bogus("bad.secure.test.")
	plain := signeddns.NewZone("plain.test.", false)
	plain.Add("www 60 IN TXT hello")
	auth := signeddns.Start(t, secure, plain)

	for _, noEDE := range []bool{false, true} {
		res := unbound.Start(t, unbound.Config{
			Stubs:        map[string]string{"secure.test.": auth.Addr, "plain.test.": auth.Addr},
			TrustAnchors: []string{secure.TrustAnchor()},
			NoEDE:        noEDE,
		})
		for _, c := range []struct {
			name  string
			qtype uint16
			rcode int
			ad    bool
			ede   uint16 // expected when EDE is on and rcode is SERVFAIL
		}{
			{"www.secure.test.", dns.TypeTXT, dns.RcodeSuccess, true, 0},
			{"www.secure.test.", dns.TypeCAA, dns.RcodeSuccess, true, 0},       // NODATA, proven
			{"nothing.secure.test.", dns.TypeTXT, dns.RcodeNameError, true, 0}, // NXDOMAIN, proven
			{"www.plain.test.", dns.TypeTXT, dns.RcodeSuccess, false, 0},
			{"nothing.plain.test.", dns.TypeTXT, dns.RcodeNameError, false, 0},
			{"bad.secure.test.", dns.TypeTXT, dns.RcodeServerFailure, false, dns.ExtendedErrorCodeSignatureExpired},
		} {
			m := new(dns.Msg)
			m.SetQuestion(c.name, c.qtype)
			m.SetEdns0(1232, true)
			resp, err := dns.Exchange(m, res.Addr)
			if err != nil {
				t.Fatalf("EDE off %v: %s %s: %v", noEDE, c.name, dns.TypeToString[c.qtype], err)
			}
			if resp.Rcode != c.rcode || resp.AuthenticatedData != c.ad {
				t.Errorf("EDE off %v: %s %s: %s AD=%v, want %s AD=%v\n%v", noEDE, c.name, dns.TypeToString[c.qtype],
					dns.RcodeToString[resp.Rcode], resp.AuthenticatedData, dns.RcodeToString[c.rcode], c.ad, resp)
			}
			var ede []uint16
			if opt := resp.IsEdns0(); opt != nil {
				for _, o := range opt.Option {
					if e, ok := o.(*dns.EDNS0_EDE); ok {
						ede = append(ede, e.InfoCode)
					}
				}
			}
			if c.ede != 0 && !noEDE && (len(ede) == 0 || ede[0] != c.ede) {
				t.Errorf("%s: extended errors %v, want %d", c.name, ede, c.ede)
			}
			if noEDE && len(ede) > 0 {
				t.Errorf("%s: extended errors %v with EDE off", c.name, ede)
			}
			m.CheckingDisabled = true
			m.Id = dns.Id()
			if resp, err := dns.Exchange(m, res.Addr); err != nil || resp.Rcode != dns.RcodeSuccess && resp.Rcode != dns.RcodeNameError {
				t.Errorf("EDE off %v: %s with CD: %v %v", noEDE, c.name, err, resp)
			}
		}
	}
}
