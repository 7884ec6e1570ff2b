package access

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// Client is where a request comes from.
type Client struct {
	Peer      netip.Addr // the TCP peer
	Forwarded []string   // the forwarded header's entries, as sent, left to right
	// Addr is the client the checks look at: the peer, or, when the peer
	// is a trusted proxy, the right-most forwarded address that is not one.
	// Invalid when a trusted proxy's header does not parse: no range holds
	// it and it has no PTR name.
	Addr netip.Addr
	How  string // how Addr was chosen, for explain and the log
}

// clients chooses a request's client address from its peer and headers.
type clients struct {
	trusted []netip.Prefix
	header  string // canonical
	rfc7239 bool   // the header is Forwarded: for= parameters
}

func (c clients) isTrusted(a netip.Addr) bool {
	for _, p := range c.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// of is the client of a request from peer with headers h. The forwarded
// header is believed only from a trusted proxy, and only as far as the
// chain of trusted proxies goes: each appends the address it got the
// request from, so the right-most entry that is not a trusted proxy is the
// first address no trusted proxy vouches for beyond.
func (c clients) of(peer netip.Addr, h http.Header) Client {
	peer = peer.Unmap()
	cl := Client{Peer: peer, Addr: peer, How: "the peer"}
	for _, v := range h.Values(c.header) {
		cl.Forwarded = append(cl.Forwarded, c.entries(v)...)
	}
	if len(cl.Forwarded) == 0 {
		return cl
	}
	if !c.isTrusted(peer) {
		cl.How = fmt.Sprintf("the peer: it is not a trusted proxy, so %s is ignored", c.header)
		return cl
	}
	for i := len(cl.Forwarded) - 1; i >= 0; i-- {
		a, ok := parseForwarded(cl.Forwarded[i])
		if !ok {
			cl.Addr = netip.Addr{}
			cl.How = fmt.Sprintf("none: the trusted proxies' %s entry %q is not an address", c.header, cl.Forwarded[i])
			return cl
		}
		cl.Addr = a
		if !c.isTrusted(a) {
			cl.How = fmt.Sprintf("forwarded by trusted proxy %s (%s entry %d of %d)", peer, c.header, i+1, len(cl.Forwarded))
			return cl
		}
	}
	cl.How = fmt.Sprintf("the left-most %s entry: every address in it is a trusted proxy", c.header)
	return cl
}

// entries splits one header line into its hops: comma-separated, and for
// Forwarded the for= parameter of each element ("" when it has none).
func (c clients) entries(v string) []string {
	var out []string
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		if !c.rfc7239 {
			out = append(out, e)
			continue
		}
		var hop string
		for _, pair := range strings.Split(e, ";") {
			k, val, _ := strings.Cut(strings.TrimSpace(pair), "=")
			if strings.EqualFold(strings.TrimSpace(k), "for") {
				hop = strings.Trim(strings.TrimSpace(val), `"`)
			}
		}
		out = append(out, hop)
	}
	return out
}

// parseForwarded reads one hop: an address, with or without a port, IPv6
// in brackets or bare. Obfuscated and "unknown" hops (RFC 7239 §6) do not
// parse.
func parseForwarded(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.WithZone("").Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().WithZone("").Unmap(), true
	}
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")); err == nil && strings.HasPrefix(s, "[") {
		return a.WithZone("").Unmap(), true
	}
	return netip.Addr{}, false
}
