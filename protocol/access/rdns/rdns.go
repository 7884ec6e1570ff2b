// Package rdns looks up an address's PTR names through configured
// resolvers (never the system's), checks which resolve back to the
// address (forward confirmation), and keeps each answer for its TTL.
package rdns

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// MaxNames bounds the PTR names of one address that are looked at (and
// looked up again, to confirm): an address with more is an odd zone, and
// each costs a query.
const MaxNames = 8

// udpSize is the EDNS0 buffer size advertised; larger answers come back
// truncated and are asked again over TCP.
const udpSize = 1232

// Names are an address's PTR names.
type Names struct {
	All []string // every PTR name (at most MaxNames), lower case, no trailing dot
	// Confirmed are those whose A or AAAA records hold the address;
	// Refuted those that do not resolve to it; Failed those whose lookup
	// failed, with why. Empty when not confirming.
	Confirmed []string
	Refuted   []string
	Failed    map[string]string
}

// Resolver asks servers, in order, and caches whole answers.
type Resolver struct {
	servers []string
	maxTTL  time.Duration
	confirm bool

	mu    sync.Mutex
	cache map[netip.Addr]entry
}

type entry struct {
	names   Names
	expires time.Time
}

// maxEntries bounds the cache; past it, expired answers go, then any.
const maxEntries = 10_000

// New is a resolver that asks servers (host:port) and keeps answers at
// most maxTTL; confirm looks each PTR name up again.
func New(servers []string, maxTTL time.Duration, confirm bool) *Resolver {
	return &Resolver{servers: servers, maxTTL: maxTTL, confirm: confirm, cache: map[netip.Addr]entry{}}
}

// Lookup is addr's names. An error means no resolver gave an answer
// (timeout, SERVFAIL, unreachable): the names are not known. A name with
// no PTR records (NXDOMAIN, or NOERROR and none) has no names.
func (r *Resolver) Lookup(ctx context.Context, addr netip.Addr) (Names, error) {
	addr = addr.Unmap()
	now := time.Now()
	r.mu.Lock()
	e, ok := r.cache[addr]
	r.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.names, nil
	}
	names, ttl, err := r.lookup(ctx, addr)
	if err != nil {
		return Names{}, err
	}
	if len(names.Failed) == 0 {
		r.store(addr, names, now.Add(min(ttl, r.maxTTL)))
	}
	return names, nil
}

func (r *Resolver) store(addr netip.Addr, n Names, expires time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.cache) >= maxEntries {
		now := time.Now()
		for k, e := range r.cache {
			if now.After(e.expires) {
				delete(r.cache, k)
			}
		}
		for k := range r.cache {
			if len(r.cache) < maxEntries {
				break
			}
			delete(r.cache, k)
		}
	}
	r.cache[addr] = entry{names: n, expires: expires}
}

func (r *Resolver) lookup(ctx context.Context, addr netip.Addr) (Names, time.Duration, error) {
	rev, err := dns.ReverseAddr(addr.String())
	if err != nil {
		return Names{}, 0, err
	}
	resp, err := r.exchange(ctx, rev, dns.TypePTR)
	if err != nil {
		return Names{}, 0, err
	}
	var n Names
	ttl := r.maxTTL
	if resp.Rcode == dns.RcodeNameError {
		return n, negativeTTL(resp, ttl), nil
	}
	for _, rr := range resp.Answer {
		if p, ok := rr.(*dns.PTR); ok && len(n.All) < MaxNames {
			n.All = append(n.All, strings.TrimSuffix(strings.ToLower(p.Ptr), "."))
			ttl = min(ttl, time.Duration(p.Hdr.Ttl)*time.Second)
		}
	}
	if len(n.All) == 0 {
		return n, negativeTTL(resp, ttl), nil
	}
	if r.confirm {
		ttl = min(ttl, r.confirmAll(ctx, addr, &n))
	}
	return n, ttl, nil
}

// confirmAll looks every PTR name up again, at once, and sorts them into
// confirmed, refuted and failed; it returns the shortest TTL it saw.
func (r *Resolver) confirmAll(ctx context.Context, addr netip.Addr, n *Names) time.Duration {
	qtype := dns.TypeA
	if addr.Is6() {
		qtype = dns.TypeAAAA
	}
	type answer struct {
		holds bool
		ttl   time.Duration
		err   error
	}
	answers := make([]answer, len(n.All))
	var wg sync.WaitGroup
	for i, name := range n.All {
		wg.Go(func() {
			a := &answers[i]
			resp, err := r.exchange(ctx, name, qtype)
			if err != nil {
				a.err = err
				return
			}
			a.ttl = r.maxTTL
			for _, rr := range resp.Answer {
				var ip []byte
				switch v := rr.(type) {
				case *dns.A:
					ip = v.A
				case *dns.AAAA:
					ip = v.AAAA
				default:
					continue
				}
				a.ttl = min(a.ttl, time.Duration(rr.Header().Ttl)*time.Second)
				if got, ok := netip.AddrFromSlice(ip); ok && got.Unmap() == addr {
					a.holds = true
				}
			}
		})
	}
	wg.Wait()
	ttl := r.maxTTL
	for i, name := range n.All {
		a := answers[i]
		switch {
		case a.err != nil:
			if n.Failed == nil {
				n.Failed = map[string]string{}
			}
			n.Failed[name] = a.err.Error()
		case a.holds:
			n.Confirmed = append(n.Confirmed, name)
		default:
			n.Refuted = append(n.Refuted, name)
		}
		ttl = min(ttl, a.ttl)
	}
	return ttl
}

// negativeTTL is how long "no names" holds: the SOA's minimum (RFC 2308)
// when the answer carries one, else max.
func negativeTTL(resp *dns.Msg, max time.Duration) time.Duration {
	for _, rr := range resp.Ns {
		if soa, ok := rr.(*dns.SOA); ok {
			return min(max, time.Duration(min(soa.Minttl, soa.Hdr.Ttl))*time.Second)
		}
	}
	return max
}

// exchange asks each server in turn until one answers NOERROR or NXDOMAIN
// (returned as an answer), over UDP and over TCP when truncated.
func (r *Resolver) exchange(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.RecursionDesired = true
	m.SetEdns0(udpSize, false)
	var errs []error
	for i, server := range r.servers {
		if ctx.Err() != nil {
			break
		}
		// Each server gets its share of the time left, so a silent one
		// leaves time to ask the next.
		sub, cancel := ctx, context.CancelFunc(func() {})
		if dl, ok := ctx.Deadline(); ok {
			sub, cancel = context.WithTimeout(ctx, time.Until(dl)/time.Duration(len(r.servers)-i))
		}
		resp, err := exchangeOne(sub, m, server)
		cancel()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if resp.Rcode == dns.RcodeSuccess || resp.Rcode == dns.RcodeNameError {
			return resp, nil
		}
		errs = append(errs, fmt.Errorf("%s answered %s", server, dns.RcodeToString[resp.Rcode]))
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("looking up %s %s: %w", dns.TypeToString[qtype], strings.TrimSuffix(name, "."), errors.Join(errs...))
}

func exchangeOne(ctx context.Context, m *dns.Msg, server string) (*dns.Msg, error) {
	m = m.Copy()
	m.Id = dns.Id()
	c := &dns.Client{Net: "udp", UDPSize: udpSize}
	resp, _, err := c.ExchangeContext(ctx, m, server)
	if err == nil && resp.Truncated {
		c.Net = "tcp"
		resp, _, err = c.ExchangeContext(ctx, m, server)
	}
	if err != nil {
		return nil, err
	}
	if len(resp.Question) != 1 || !strings.EqualFold(resp.Question[0].Name, m.Question[0].Name) || resp.Question[0].Qtype != m.Question[0].Qtype {
		return nil, fmt.Errorf("the answer from %s is for another question", server)
	}
	return resp, nil
}
