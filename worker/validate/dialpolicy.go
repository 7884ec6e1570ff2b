package validate

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"

	"github.com/hallmark-ca/hallmark/worker/workerconf"
)

// DialRules say where validation may connect on a client's behalf, on top
// of the built-in refusals (reservedRanges and the CA's own listeners).
type DialRules struct {
	// Deny are never connected to (policy.deny_ip_ranges); nothing lifts it.
	Deny []netip.Prefix
	// AllowReserved are exempt from the built-in refusals
	// (challenge.allow_reserved_ranges). Deny still applies to them.
	AllowReserved []netip.Prefix
	// Listeners are the CA's own; a wildcard or host-name host means every
	// local address (loopback included) on that port.
	Listeners []workerconf.Listener
}

// reservedRanges are refused unless challenge.allow_reserved_ranges lifts
// them: a client must not make the CA read its cloud metadata or reach the
// host itself through an address that only means something locally.
// Private ranges and loopback stay allowed: an internal CA validates
// internal hosts; policy.deny_ip_ranges refuses them.
var reservedRanges = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified (0.0.0.0/8; a connection to it reaches this host)"},
	{netip.MustParsePrefix("::/128"), "unspecified (::; a connection to it reaches this host)"},
	{netip.MustParsePrefix("255.255.255.255/32"), "the broadcast address"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast (224.0.0.0/4)"},
	{netip.MustParsePrefix("ff00::/8"), "multicast (ff00::/8)"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local (169.254.0.0/16, cloud metadata)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local (fe80::/10)"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "a cloud metadata address (AWS IMDS over IPv6)"},
	{netip.MustParsePrefix("100.100.100.200/32"), "a cloud metadata address (Alibaba Cloud)"},
}

// allowReservedKey is the configuration key that lifts the built-in refusals.
const allowReservedKey = "challenge.allow_reserved_ranges"

// dialPolicy decides, for each address and port, whether validation may
// connect there. It is built once; it is safe for concurrent use.
type dialPolicy struct {
	deny, allow []netip.Prefix
	listeners   []ownListener
	// localAddrs lists this host's addresses, for wildcard listeners; it is
	// asked only when a port matches one, so interface changes are seen.
	localAddrs func() []netip.Addr
}

// ownListener is a parsed workerconf.Listener; an invalid addr means any local one.
type ownListener struct {
	key  string
	addr netip.Addr
	port uint16
}

func newDialPolicy(r DialRules) *dialPolicy {
	p := &dialPolicy{
		deny:       append([]netip.Prefix(nil), r.Deny...),
		allow:      append([]netip.Prefix(nil), r.AllowReserved...),
		localAddrs: interfaceAddrs,
	}
	for _, l := range r.Listeners {
		host, port, err := net.SplitHostPort(l.Addr)
		if err != nil {
			continue // refused by the configuration check
		}
		n, err := strconv.Atoi(port)
		if err != nil {
			n, err = net.LookupPort("tcp", port) // a service name, from /etc/services
		}
		if err != nil || n < 1 || n > 65535 {
			continue // 0 is a port the kernel picks: nothing to match
		}
		ol := ownListener{key: l.Key, port: uint16(n)}
		if a, err := netip.ParseAddr(host); err == nil && !a.IsUnspecified() {
			ol.addr = a.Unmap().WithZone("")
		}
		p.listeners = append(p.listeners, ol)
	}
	return p
}

// refusal says why validation must not connect to ap, naming the rule and
// how to lift it, or returns "" when it may.
func (p *dialPolicy) refusal(ap netip.AddrPort) string {
	a := ap.Addr().Unmap().WithZone("")
	for _, d := range p.deny {
		if d.Contains(a) {
			return fmt.Sprintf("%s is in policy.deny_ip_ranges %s", a, d)
		}
	}
	for _, r := range p.allow {
		if r.Contains(a) {
			return ""
		}
	}
	for _, r := range reservedRanges {
		if r.prefix.Contains(a) {
			return fmt.Sprintf("%s is %s; set %s to allow it", a, r.what, allowReservedKey)
		}
	}
	for _, l := range p.listeners {
		if l.port == ap.Port() && p.isListener(l, a) {
			return fmt.Sprintf("%s is the CA's own listener (%s); set %s to allow it",
				netip.AddrPortFrom(a, ap.Port()), l.key, allowReservedKey)
		}
	}
	return ""
}

// isListener reports whether a is where l listens on its port.
func (p *dialPolicy) isListener(l ownListener, a netip.Addr) bool {
	if l.addr.IsValid() {
		return l.addr == a
	}
	if a.IsLoopback() {
		return true
	}
	for _, local := range p.localAddrs() {
		if local == a {
			return true
		}
	}
	return false
}

func interfaceAddrs() []netip.Addr {
	ifAddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, ia := range ifAddrs {
		if n, ok := ia.(*net.IPNet); ok {
			if a, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, a.Unmap())
			}
		}
	}
	return out
}

// refusedError is a connection validation did not make: the dial policy
// refused every address it had. Nothing was sent to any of them.
type refusedError struct {
	host    string // the name or address being connected to
	reasons []string
}

func (e *refusedError) Error() string {
	const shown = 3
	why := strings.Join(e.reasons[:min(len(e.reasons), shown)], "; ")
	if len(e.reasons) > shown {
		why += fmt.Sprintf(" (and %d more addresses refused)", len(e.reasons)-shown)
	}
	if len(e.reasons) == 1 {
		return "refused to connect: " + why
	}
	return fmt.Sprintf("refused to connect to every address of %s: %s", e.host, why)
}

// split separates addrs into those validation may connect to on port and
// the refused ones, with why each is refused.
func (p *dialPolicy) split(addrs []netip.Addr, port int) (allowed, refused []netip.Addr, reasons []string) {
	for _, a := range addrs {
		if why := p.refusal(netip.AddrPortFrom(a, uint16(port))); why != "" {
			refused = append(refused, a)
			reasons = append(reasons, why)
			continue
		}
		allowed = append(allowed, a)
	}
	return allowed, refused, reasons
}

// control is the dialer's last check, on the address the socket is about
// to connect to, after it exists and before connect(2) sends anything.
func (p *dialPolicy) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("refusing to connect to %q (%s): not an address and port", address, network)
	}
	if why := p.refusal(ap); why != "" {
		return &refusedError{host: ap.Addr().String(), reasons: []string{why}}
	}
	return nil
}

// asRefused returns err's refusal, if the dial policy caused it.
func asRefused(err error) (*refusedError, bool) {
	var re *refusedError
	ok := errors.As(err, &re)
	return re, ok
}
