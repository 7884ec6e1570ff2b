package validate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/hallmark-ca/hallmark/worker/workerconf"
)

const (
	// dnsUDPSize is the EDNS0 buffer size advertised and read on UDP (the DNS
	// flag day 2020 value). Larger answers come back truncated and are retried
	// over TCP, where the 16-bit length prefix caps a message at 64 KiB.
	dnsUDPSize = 1232
	// dnsExchangeTimeout bounds one query to one resolver (UDP, its
	// resends, and TCP after a truncated answer), so a silent resolver
	// leaves time to ask the next one. challenge.timeout_ms still bounds the
	// whole attempt.
	dnsExchangeTimeout = 5 * time.Second
	// dnsUDPTries is how many times one query is sent over UDP within
	// dnsExchangeTimeout: a datagram lost either way is sent again after
	// a third of the time left, instead of costing the whole query.
	dnsUDPTries = 3
)

// resolver asks the configured resolvers, in order, and never the system's.
type resolver struct {
	servers []string
	dnssec  string // challenge.dnssec (dnssec.go)
}

// ErrResolversUnreachable is the cause of a check that could not run
// because every configured resolver failed at the transport level without
// timing out (connection refused, network unreachable): the CA's own
// resolvers are down, which says nothing about the client's names. A
// resolver that answers (SERVFAIL, REFUSED, NXDOMAIN) or times out gives a
// verdict instead: a recursive resolver can fail or time out because of the
// client's own authoritative servers.
var ErrResolversUnreachable = errors.New("no configured DNS resolver could be reached")

// dnsError is a lookup that produced no usable answer: the resolvers could
// not be reached, timed out, or answered with an RCODE other than NOERROR.
type dnsError struct {
	qtype uint16
	name  string // as queried, without the trailing dot
	rcode int    // -1 when no answer arrived
	err   error  // the network error when rcode is -1; kept out of Error()
	why   string // set for failures that are neither (a CNAME loop)
	hint  string // what follows the name in Error(), when why is set
	// down is set when every resolver failed at the transport level, none
	// by timing out: see ErrResolversUnreachable.
	down bool
}

func (e *dnsError) Error() string {
	q := dns.TypeToString[e.qtype]
	switch {
	case e.why != "":
		return fmt.Sprintf("%s looking up %s for %s%s", e.why, q, e.name, e.hint)
	case e.rcode >= 0:
		return fmt.Sprintf("%s looking up %s for %s", dns.RcodeToString[e.rcode], q, e.name)
	case isTimeout(e.err):
		return fmt.Sprintf("query timed out looking up %s for %s", q, e.name)
	default:
		// The network error names our resolver's address; it stays internal.
		return fmt.Sprintf("networking error looking up %s for %s", q, e.name)
	}
}

func (e *dnsError) Unwrap() error { return e.err }

func isNXDOMAIN(err error) bool {
	var de *dnsError
	return errors.As(err, &de) && de.rcode == dns.RcodeNameError
}

// unreachable returns an error wrapping ErrResolversUnreachable, with the
// transport errors (which name our resolvers, so they are for the worker's
// log, never a problem document), when err is a lookup that no configured
// resolver could be asked; nil otherwise.
func unreachable(err error) error {
	var de *dnsError
	if !errors.As(err, &de) || !de.down {
		return nil
	}
	return fmt.Errorf("looking up %s for %s: %w: %w", dns.TypeToString[de.qtype], de.name, ErrResolversUnreachable, de.err)
}

// transportFailure reports whether err, from one exchange with one
// resolver, is a failure to reach it that is not a timeout: a dial, read or
// write error such as connection refused or network unreachable.
func transportFailure(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && !isTimeout(err)
}

func isTimeout(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// exchange sends one question and returns a NOERROR answer. NXDOMAIN and
// other RCODEs come back as a *dnsError, as do DNSSEC failures (dnssec.go),
// which end the lookup. SERVFAIL, REFUSED and network failures move on to
// the next resolver; the last failure is returned,
// marked down when every resolver failed at the transport level without
// timing out (ErrResolversUnreachable).
func (r *resolver) exchange(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
	qname := dns.Fqdn(name)
	display := strings.TrimSuffix(qname, ".")
	m := new(dns.Msg)
	m.SetQuestion(qname, qtype)
	m.RecursionDesired = true
	m.SetEdns0(dnsUDPSize, r.dnssec != workerconf.DNSSECOff)
	m.AuthenticatedData = r.dnssec != workerconf.DNSSECOff

	if len(r.servers) == 0 {
		return nil, &dnsError{qtype: qtype, name: display, rcode: -1, err: ErrNotConfigured, down: true}
	}
	var last error
	var down []error // each resolver's transport failure, while every one failed so
	allDown := true
	for _, server := range r.servers {
		if err := ctx.Err(); err != nil {
			return nil, &dnsError{qtype: qtype, name: display, rcode: -1, err: err}
		}
		resp, err := exchangeOne(ctx, m, server)
		if err != nil {
			if transportFailure(err) && ctx.Err() == nil {
				down = append(down, err)
			} else {
				allDown = false
			}
			last = &dnsError{qtype: qtype, name: display, rcode: -1, err: err}
			continue
		}
		allDown = false
		if resp.Rcode == dns.RcodeSuccess || resp.Rcode == dns.RcodeNameError {
			if err := r.insecure(resp, qtype, display); err != nil {
				return nil, err
			}
		}
		if resp.Rcode == dns.RcodeServerFailure {
			if err := r.bogus(ctx, m, resp, server, qtype, display); err != nil {
				return nil, err // never another resolver's answer instead
			}
		}
		switch resp.Rcode {
		case dns.RcodeSuccess:
			return resp, nil
		case dns.RcodeServerFailure, dns.RcodeRefused:
			last = &dnsError{qtype: qtype, name: display, rcode: resp.Rcode}
			continue
		default:
			return nil, &dnsError{qtype: qtype, name: display, rcode: resp.Rcode}
		}
	}
	if allDown {
		return nil, &dnsError{qtype: qtype, name: display, rcode: -1, err: errors.Join(down...), down: true}
	}
	return nil, last
}

// exchangeOne asks one server over UDP, then over TCP if the answer was
// truncated, and checks the answer is for the question asked. It takes at
// most dnsExchangeTimeout.
func exchangeOne(ctx context.Context, m *dns.Msg, server string) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, dnsExchangeTimeout)
	defer cancel()
	m = m.Copy()
	// A fresh ID for each query to each resolver: with the fresh source
	// port of its socket, what an off-path attacker must guess to forge an
	// answer.
	m.Id = dns.Id()
	resp, err := exchangeConn(ctx, "udp", m, server)
	if err == nil && resp.Truncated {
		resp, err = exchangeConn(ctx, "tcp", m, server)
	}
	if err != nil {
		return nil, err
	}
	if len(resp.Question) != 1 || !strings.EqualFold(resp.Question[0].Name, m.Question[0].Name) ||
		resp.Question[0].Qtype != m.Question[0].Qtype {
		return nil, fmt.Errorf("answer from %s is for a different question", server)
	}
	return resp, nil
}

// exchangeConn sends m to server over a connection of its own (over UDP, a
// socket with a fresh source port) and reads the answer, until ctx ends.
// Over UDP it sends m again, on the same socket and with the same ID, each
// time a share of the time left (dnsUDPTries sends in all) passes without
// an answer, and it takes an answer to any of the sends: a late answer to
// an earlier send answers the same question from the same server, and an
// answer to anything else cannot arrive on this socket. (A fresh ID per
// send would throw away the late answer of a resolver that is slow but
// working.) Any other failure (connection refused) is returned at once.
func exchangeConn(ctx context.Context, network string, m *dns.Msg, server string) (*dns.Msg, error) {
	// The client's own timeouts would otherwise apply miekg/dns's 2 s
	// default to the dial and each read; ctx's deadline is the bound.
	c := &dns.Client{Net: network, UDPSize: dnsUDPSize, Timeout: dnsExchangeTimeout}
	conn, err := c.DialContext(ctx, server)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	defer conn.Close()
	// miekg/dns obeys ctx's deadline but not its cancellation (a CAA climb
	// cancelled, the worker stopping): closing the connection ends a read.
	defer context.AfterFunc(ctx, func() { conn.Close() })()
	tries := 1
	if network == "udp" {
		tries = dnsUDPTries
	}
	deadline, _ := ctx.Deadline() // set by exchangeOne
	for try := 1; ; try++ {
		tryCtx, cancel := ctx, context.CancelFunc(func() {})
		if try < tries {
			tryCtx, cancel = context.WithTimeout(ctx, time.Until(deadline)/time.Duration(tries-try+1))
		}
		resp, _, err := c.ExchangeWithConnContext(tryCtx, m, conn)
		cancel()
		switch {
		case err == nil:
			return resp, nil
		case ctx.Err() != nil:
			// Out of time: whatever the read said (the connection was
			// closed under it), that is a timeout.
			return nil, ctx.Err()
		case !isTimeout(err) || try >= tries:
			return nil, err
		}
	}
}

// lookup returns the records of type qtype at name, following CNAMEs (at
// most maxCNAMEChain of them) within an answer and across queries. No
// records and no error means the name exists without that type (NODATA).
func (r *resolver) lookup(ctx context.Context, name string, qtype uint16) ([]dns.RR, error) {
	target := dns.CanonicalName(name)
	hops := 0
	for {
		queried := target
		resp, err := r.exchange(ctx, queried, qtype)
		if err != nil {
			return nil, err
		}
		for {
			var found []dns.RR
			next := ""
			for _, rr := range resp.Answer {
				h := rr.Header()
				if !strings.EqualFold(h.Name, target) || h.Class != dns.ClassINET {
					continue
				}
				if h.Rrtype == qtype {
					found = append(found, rr)
				} else if c, ok := rr.(*dns.CNAME); ok && qtype != dns.TypeCNAME {
					next = dns.CanonicalName(c.Target)
				}
			}
			if len(found) > 0 {
				return found, nil
			}
			if next == "" {
				if target == queried {
					return nil, nil // NODATA
				}
				break // the answer stopped at a CNAME: ask about its target
			}
			hops++
			if hops > maxCNAMEChain {
				return nil, &dnsError{qtype: qtype, name: strings.TrimSuffix(dns.CanonicalName(name), "."), rcode: -1,
					why: fmt.Sprintf("more than %d CNAMEs (or a CNAME loop)", maxCNAMEChain)}
			}
			target = next
		}
	}
}

// lookupIPs resolves name to its addresses, IPv6 first (as Boulder does),
// asking for AAAA and A at once. One family failing is tolerated when the
// other answers.
func (r *resolver) lookupIPs(ctx context.Context, name string) ([]netip.Addr, error) {
	type answer struct {
		addrs []netip.Addr
		err   error
	}
	ask := func(qtype uint16, out chan<- answer) {
		rrs, err := r.lookup(ctx, name, qtype)
		var addrs []netip.Addr
		for _, rr := range rrs {
			var ip net.IP
			switch rr := rr.(type) {
			case *dns.A:
				ip = rr.A
			case *dns.AAAA:
				ip = rr.AAAA
			}
			if a, ok := netip.AddrFromSlice(ip); ok && a.IsValid() {
				addrs = append(addrs, a.Unmap())
			}
		}
		out <- answer{addrs, err}
	}
	v6, v4 := make(chan answer, 1), make(chan answer, 1)
	go ask(dns.TypeAAAA, v6)
	go ask(dns.TypeA, v4)
	a6, a4 := <-v6, <-v4
	// A bogus (or, when required, unsigned) answer for either family fails
	// the lookup, even when the other family answered.
	for _, a := range []answer{a6, a4} {
		if isDNSSECFailure(a.err) {
			return nil, a.err
		}
	}
	addrs := append(a6.addrs, a4.addrs...)
	if len(addrs) > 0 {
		return addrs, nil
	}
	if a4.err != nil {
		return nil, a4.err
	}
	if a6.err != nil {
		return nil, a6.err
	}
	return nil, nil
}

// dial connects to port at the first IPv6 address of addrs and, if that
// fails, at the first IPv4 one (Boulder's order and fallback), never at an
// address the dial policy refuses: those are skipped, before any packet,
// and listed in att.AddressesRefused. When an IPv4 address remains to be
// tried, the IPv6 attempt gets at most half the time left, so an IPv6
// address that drops packets leaves time for IPv4. used is the address
// connected to or, when every attempt failed, the last one tried, and err
// is its failure (a *refusedError, with used invalid, when every address
// was refused); att.AddressesTried lists the addresses that failed before
// used.
func (v *Validator) dial(ctx context.Context, host string, addrs []netip.Addr, port int, att *Attempt) (conn net.Conn, used netip.Addr, err error) {
	allowed, refused, reasons := v.dialer.split(addrs, port)
	if len(refused) > 0 {
		att.AddressesRefused = addrStrings(refused)
	}
	if len(allowed) == 0 {
		return nil, netip.Addr{}, &refusedError{host: host, reasons: reasons}
	}
	var try []netip.Addr
	for _, want6 := range []bool{true, false} {
		for _, a := range allowed {
			if a.Is6() == want6 {
				try = append(try, a)
				break
			}
		}
	}
	d := net.Dialer{Control: v.dialer.control}
	var tried []netip.Addr
	defer func() {
		att.AddressUsed = used.String()
		if len(tried) > 0 {
			att.AddressesTried = addrStrings(tried)
		}
	}()
	for i, a := range try {
		if i > 0 {
			tried = append(tried, used)
		}
		used = a
		dctx, cancel := ctx, context.CancelFunc(func() {})
		if deadline, ok := ctx.Deadline(); ok && i < len(try)-1 {
			dctx, cancel = context.WithTimeout(ctx, time.Until(deadline)/2)
		}
		conn, err = d.DialContext(dctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
		cancel()
		if err == nil {
			return conn, used, nil
		}
		if ended(ctx) != nil {
			break // no time left: used is the address that took it
		}
	}
	return nil, used, err
}

func addrStrings(addrs []netip.Addr) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = a.String()
	}
	return out
}
