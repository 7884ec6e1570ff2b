package access

import (
	"net/http"
	"net/netip"
	"testing"
)

// TestClientAddress: the forwarded header is believed only from a trusted
// proxy, and then its right-most entry that is not a trusted proxy is the
// client; anything a client sends further left is ignored.
func TestClientAddress(t *testing.T) {
	t.Parallel()
	trusted, _ := parsePrefixes("t", []string{"10.0.0.0/8", "fd00::/8"})
	xff := clients{trusted: trusted, header: "X-Forwarded-For"}
	fwd := clients{trusted: trusted, header: "Forwarded", rfc7239: true}
	for _, c := range []struct {
		name    string
		c       clients
		peer    string
		headers []string
		want    string // "" for none
	}{
		{"no header", xff, "192.0.2.1", nil, "192.0.2.1"},
		{"an untrusted peer's header is ignored", xff, "192.0.2.1", []string{"10.9.9.9"}, "192.0.2.1"},
		{"a trusted proxy names its client", xff, "10.0.0.2", []string{"192.0.2.7"}, "192.0.2.7"},
		{"the client's own entries further left do not count", xff, "10.0.0.2", []string{"203.0.113.66, 192.0.2.7"}, "192.0.2.7"},
		{"a chain of trusted proxies", xff, "10.0.0.2", []string{"192.0.2.7, 10.1.1.1", "10.2.2.2"}, "192.0.2.7"},
		{"every hop trusted: the left-most", xff, "10.0.0.2", []string{"10.3.3.3, 10.1.1.1"}, "10.3.3.3"},
		{"a port and brackets", xff, "10.0.0.2", []string{"[2001:db8::1]:4711"}, "2001:db8::1"},
		{"an address with a port", xff, "10.0.0.2", []string{"192.0.2.7:5555"}, "192.0.2.7"},
		{"a mapped address is its IPv4", xff, "::ffff:10.0.0.2", []string{"::ffff:192.0.2.7"}, "192.0.2.7"},
		{"garbage from a trusted proxy: no client", xff, "10.0.0.2", []string{"192.0.2.7, not-an-address"}, ""},
		{"garbage left of the client is never read", xff, "10.0.0.2", []string{"junk, 192.0.2.7"}, "192.0.2.7"},
		{"RFC 7239", fwd, "10.0.0.2", []string{`for=203.0.113.66, for="[2001:db8::7]:80";proto=https`}, "2001:db8::7"},
		{"RFC 7239 unknown", fwd, "10.0.0.2", []string{`for=unknown`}, ""},
		{"RFC 7239 from an untrusted peer", fwd, "192.0.2.1", []string{`for=10.1.1.1`}, "192.0.2.1"},
	} {
		h := http.Header{}
		for _, v := range c.headers {
			h.Add(c.c.header, v)
		}
		got := c.c.of(netip.MustParseAddr(c.peer), h)
		if (c.want == "") != !got.Addr.IsValid() || (c.want != "" && got.Addr != netip.MustParseAddr(c.want)) {
			t.Errorf("%s: client %v (%s), want %q", c.name, got.Addr, got.How, c.want)
		}
		if got.How == "" {
			t.Errorf("%s: no explanation", c.name)
		}
	}
}
