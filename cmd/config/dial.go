package config

import (
	"fmt"
	"net/netip"
	"strings"
)

// ParseIPRanges parses the CIDR ranges of an *_ranges key. An IPv4-mapped
// range ("::ffff:10.0.0.0/104") means its IPv4 range (10.0.0.0/8), so a
// range matches an address whichever way either is written; host bits are
// dropped. key names the setting in the error.
func ParseIPRanges(key string, in []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(in))
	for _, c := range in {
		pfx, err := netip.ParsePrefix(strings.TrimSpace(c))
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a CIDR range: %w", key, c, err)
		}
		bits := pfx.Bits()
		if pfx.Addr().Is4In6() && bits >= 96 {
			bits -= 96
		}
		out = append(out, netip.PrefixFrom(pfx.Addr().Unmap(), bits).Masked())
	}
	return out, nil
}

// Listener is one of the CA's own listening addresses and the key that
// sets it.
type Listener struct {
	Key  string
	Addr string // host:port as configured
}

// Listeners are the CA's own listeners set in c: the frontend's, the
// panel's, the worker's health and the profiling ones. Validation never
// connects to them on a client's behalf.
func (c Config) Listeners() []Listener {
	var out []Listener
	for _, l := range []Listener{
		{"server.listen", c.Server.Listen},
		{"server.public_http_listen", c.Server.PublicHTTPListen},
		{"server.pprof_listen", c.Server.PprofListen},
		{"admin.listen", c.Admin.Listen},
		{"worker.health_listen", c.Worker.HealthListen},
		{"worker.pprof_listen", c.Worker.PprofListen},
	} {
		if l.Addr != "" {
			out = append(out, l)
		}
	}
	return out
}

// validateIPRanges checks every key of CIDR ranges, and that no range of
// challenge.allow_reserved_ranges lies wholly in policy.deny_ip_ranges,
// which would win over it.
func (c Config) validateIPRanges(add func(key, format string, args ...any)) {
	parsed := map[string][]netip.Prefix{}
	for _, k := range []struct {
		key string
		in  []string
	}{
		{"policy.allow_ip_ranges", c.Policy.AllowIPRanges},
		{"policy.deny_ip_ranges", c.Policy.DenyIPRanges},
		{"challenge.allow_reserved_ranges", c.Challenge.AllowReservedRanges},
	} {
		for _, r := range k.in {
			p, err := ParseIPRanges(k.key, []string{r})
			if err != nil {
				add(k.key, "%q is not a CIDR range (e.g. \"10.0.0.0/8\", \"fd00::/8\")", r)
				continue
			}
			parsed[k.key] = append(parsed[k.key], p[0])
		}
	}
	for _, a := range parsed["challenge.allow_reserved_ranges"] {
		for _, d := range parsed["policy.deny_ip_ranges"] {
			if d.Bits() <= a.Bits() && d.Contains(a.Addr()) {
				add("challenge.allow_reserved_ranges", "%s lies in policy.deny_ip_ranges %s, which wins: validation never connects there; remove one of them", a, d)
			}
		}
	}
}
