// Package signeddns runs an authoritative DNS server on loopback (miekg/dns,
// UDP and TCP on one port) for zones the test builds, each DNSSEC-signed
// by a key the test makes (ECDSA P-256, algorithm 13; one key as KSK and
// ZSK) or left unsigned. It signs on every answer: RRSIGs beside each
// RRset and NSEC denial of existence (RFC 4034, RFC 4035), for a DO query;
// a name marked Bogus gets signatures that expired long ago, so a
// validating resolver that anchors the zone finds its answers bogus. A
// validating resolver (tests/unbound) takes the zone's TrustAnchor.
package signeddns

import (
	"crypto"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// ttl is every record's TTL; each test starts its own resolver, so the
// resolver's cache outlives nothing.
const ttl = 60

// Zone is one zone the server is authoritative for.
type Zone struct {
	Origin string // fully qualified, lower case: "secure.test."

	key  *dns.DNSKEY // nil for an unsigned zone
	priv crypto.Signer

	mu    sync.Mutex
	rrs   map[string]map[uint16][]dns.RR // owner -> type -> RRset
	bogus map[string]bool                // owners whose signatures expired
}

// NewZone makes a zone holding its SOA and NS (and, when signed, its
// DNSKEY) at the apex.
func NewZone(origin string, signed bool) *Zone {
	z := &Zone{Origin: dns.CanonicalName(origin), rrs: map[string]map[uint16][]dns.RR{}, bogus: map[string]bool{}}
	z.Add(fmt.Sprintf("%s %d IN SOA ns.%s hostmaster.%s 1 3600 600 86400 %d", z.Origin, ttl, z.Origin, z.Origin, ttl))
	z.Add(fmt.Sprintf("%s %d IN NS ns.%s", z.Origin, ttl, z.Origin))
	if signed {
		z.key = &dns.DNSKEY{Hdr: dns.RR_Header{Name: z.Origin, Rrtype: dns.TypeDNSKEY, Class: dns.ClassINET, Ttl: ttl},
			Flags: 257, Protocol: 3, Algorithm: dns.ECDSAP256SHA256}
		priv, err := z.key.Generate(256)
		if err != nil {
			panic("signeddns: " + err.Error())
		}
		z.priv = priv.(crypto.Signer)
		z.put(z.key)
	}
	return z
}

// Add adds records in zone-file syntax, one per string ("www.secure.test.
// 60 IN A 127.0.0.1"); a name without a dot at its end is relative to the
// zone. It panics on a record that does not parse or lies outside the zone.
func (z *Zone) Add(records ...string) {
	for _, s := range records {
		zp := dns.NewZoneParser(strings.NewReader(s), z.Origin, "")
		zp.SetDefaultTTL(ttl)
		rr, ok := zp.Next()
		if !ok || zp.Err() != nil {
			panic(fmt.Sprintf("signeddns: record %q: %v", s, zp.Err()))
		}
		if !dns.IsSubDomain(z.Origin, dns.CanonicalName(rr.Header().Name)) {
			panic(fmt.Sprintf("signeddns: %q is outside %s", s, z.Origin))
		}
		z.put(rr)
	}
}

func (z *Zone) put(rr dns.RR) {
	z.mu.Lock()
	defer z.mu.Unlock()
	owner := dns.CanonicalName(rr.Header().Name)
	rr.Header().Name = owner
	if z.rrs[owner] == nil {
		z.rrs[owner] = map[uint16][]dns.RR{}
	}
	z.rrs[owner][rr.Header().Rrtype] = append(z.rrs[owner][rr.Header().Rrtype], rr)
}

// Bogus makes every signature over the RRsets at name (and over a denial
// that name does not exist or has no such type) one that expired twenty
// days ago: a validating resolver finds the answers bogus.
func (z *Zone) Bogus(name string) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.bogus[dns.CanonicalName(name)] = true
}

// TrustAnchor is the zone's DNSKEY as a zone-file line, for a resolver's
// trust anchor; "" for an unsigned zone.
func (z *Zone) TrustAnchor() string {
	if z.key == nil {
		return ""
	}
	return z.key.String()
}

// DS is the zone's DS record (SHA-256), for a parent zone; nil when
// unsigned.
func (z *Zone) DS() *dns.DS {
	if z.key == nil {
		return nil
	}
	return z.key.ToDS(dns.SHA256)
}

// Server answers for its zones on 127.0.0.1 and refuses every other name.
type Server struct {
	Addr  string // "127.0.0.1:port", UDP and TCP
	zones []*Zone
}

// Start serves zones until the test ends.
func Start(t testing.TB, zones ...*Zone) *Server {
	t.Helper()
	s := &Server{zones: zones}
	var (
		pc  net.PacketConn
		ln  net.Listener
		err error
	)
	for range 20 { // UDP and TCP must share a port number
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatalf("signeddns: %v", err)
		}
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
	}
	if err != nil {
		t.Fatalf("signeddns: no port free for both UDP and TCP: %v", err)
	}
	s.Addr = pc.LocalAddr().String()
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: s}, {Listener: ln, Handler: s}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go func() { _ = srv.ActivateAndServe() }()
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			t.Fatal("signeddns: server did not start")
		}
		t.Cleanup(func() { _ = srv.Shutdown() })
	}
	return s
}

// zoneFor is the deepest zone holding name, or nil.
func (s *Server) zoneFor(name string) *Zone {
	var best *Zone
	for _, z := range s.zones {
		if dns.IsSubDomain(z.Origin, name) && (best == nil || dns.CountLabel(z.Origin) > dns.CountLabel(best.Origin)) {
			best = z
		}
	}
	return best
}

// ServeDNS answers one query.
func (s *Server) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	size, do := uint16(dns.MinMsgSize), false
	if opt := req.IsEdns0(); opt != nil {
		size, do = max(opt.UDPSize(), dns.MinMsgSize), opt.Do()
		m.SetEdns0(4096, do)
	}
	var z *Zone
	if len(req.Question) == 1 {
		z = s.zoneFor(dns.CanonicalName(req.Question[0].Name))
	}
	switch {
	case len(req.Question) != 1:
		m.Rcode = dns.RcodeFormatError
	case z == nil:
		m.Rcode = dns.RcodeRefused
	default:
		m.Authoritative = true
		z.answer(m, dns.CanonicalName(req.Question[0].Name), req.Question[0].Qtype, do && z.key != nil)
	}
	if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
		m.Truncate(int(size))
	}
	_ = w.WriteMsg(m)
}

// answer fills m for qname/qtype from z, with signatures and denials when
// sign is set.
func (z *Zone) answer(m *dns.Msg, qname string, qtype uint16, sign bool) {
	z.mu.Lock()
	defer z.mu.Unlock()
	set := func(owner string, t uint16) []dns.RR {
		rrs := slices.Clone(z.rrs[owner][t])
		if sign && len(rrs) > 0 {
			rrs = append(rrs, z.sign(rrs, z.bogus[owner]))
		}
		return rrs
	}
	types, exists := z.rrs[qname]
	switch {
	case exists && len(types[qtype]) > 0:
		m.Answer = set(qname, qtype)
		return
	case exists && len(types[dns.TypeCNAME]) > 0:
		m.Answer = set(qname, dns.TypeCNAME) // the resolver follows it
		return
	}
	m.Ns = set(z.Origin, dns.TypeSOA)
	if !exists && !z.hasBelow(qname) {
		m.Rcode = dns.RcodeNameError
	}
	if !sign {
		return
	}
	// NODATA: the NSEC at qname; an empty non-terminal or NXDOMAIN: the
	// NSEC covering it and, for NXDOMAIN, the one covering the wildcard of
	// its closest encloser.
	bogus := z.bogus[qname]
	owners := z.owners()
	proof := []string{z.covering(owners, qname)}
	if m.Rcode == dns.RcodeNameError {
		if w := z.covering(owners, "*."+z.closestEncloser(qname)); w != proof[0] {
			proof = append(proof, w)
		}
	}
	for _, o := range proof {
		nsec := z.nsec(owners, o)
		m.Ns = append(m.Ns, nsec, z.sign([]dns.RR{nsec}, bogus))
	}
}

// hasBelow reports whether some owner lies under name (name is an empty
// non-terminal).
func (z *Zone) hasBelow(name string) bool {
	for o := range z.rrs {
		if o != name && dns.IsSubDomain(name, o) {
			return true
		}
	}
	return false
}

// closestEncloser is the deepest ancestor of name that exists.
func (z *Zone) closestEncloser(name string) string {
	for {
		i, end := dns.NextLabel(name, 0)
		if end {
			return z.Origin
		}
		name = name[i:]
		if _, ok := z.rrs[name]; ok || z.hasBelow(name) || name == z.Origin {
			return name
		}
	}
}

// owners are the zone's owner names in canonical order (RFC 4034 §6.1).
func (z *Zone) owners() []string {
	out := make([]string, 0, len(z.rrs))
	for o := range z.rrs {
		out = append(out, o)
	}
	slices.SortFunc(out, canonicalCompare)
	return out
}

// covering is the owner whose NSEC covers (or matches) name: the last one
// at or before it in canonical order.
func (z *Zone) covering(owners []string, name string) string {
	c := owners[0]
	for _, o := range owners {
		if canonicalCompare(o, name) <= 0 {
			c = o
		}
	}
	return c
}

// nsec is owner's NSEC record: the next owner and owner's types.
func (z *Zone) nsec(owners []string, owner string) *dns.NSEC {
	i := slices.Index(owners, owner)
	next := owners[(i+1)%len(owners)]
	types := []uint16{dns.TypeRRSIG, dns.TypeNSEC}
	for t := range z.rrs[owner] {
		types = append(types, t)
	}
	slices.Sort(types)
	return &dns.NSEC{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeNSEC, Class: dns.ClassINET, Ttl: ttl},
		NextDomain: next, TypeBitMap: types}
}

// sign returns the RRSIG over rrset (one owner, one type), valid from an
// hour ago for a week, or, when expired, for ten days that ended ten days ago.
func (z *Zone) sign(rrset []dns.RR, expired bool) dns.RR {
	now := time.Now()
	from, until := now.Add(-time.Hour), now.Add(7*24*time.Hour)
	if expired {
		from, until = now.Add(-20*24*time.Hour), now.Add(-10*24*time.Hour)
	}
	h := rrset[0].Header()
	sig := &dns.RRSIG{Hdr: dns.RR_Header{Name: h.Name, Rrtype: dns.TypeRRSIG, Class: dns.ClassINET, Ttl: h.Ttl},
		Algorithm: z.key.Algorithm, KeyTag: z.key.KeyTag(), SignerName: z.Origin,
		Inception: uint32(from.Unix()), Expiration: uint32(until.Unix())}
	if err := sig.Sign(z.priv, rrset); err != nil {
		panic("signeddns: signing " + h.Name + ": " + err.Error())
	}
	return sig
}

// canonicalCompare orders names as RFC 4034 §6.1 does: label by label
// from the right, each compared as lower-case octets.
func canonicalCompare(a, b string) int {
	la, lb := dns.SplitDomainName(strings.ToLower(a)), dns.SplitDomainName(strings.ToLower(b))
	for i, j := len(la)-1, len(lb)-1; i >= 0 && j >= 0; i, j = i-1, j-1 {
		if c := strings.Compare(la[i], lb[j]); c != 0 {
			return c
		}
	}
	return len(la) - len(lb)
}
