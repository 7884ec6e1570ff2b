// Package testdns runs a real DNS server (miekg/dns) on loopback for tests:
// by default every name has A 127.0.0.1 and nothing else; a test can set A,
// AAAA, TXT, CAA and PTR records, make a name NXDOMAIN or SERVFAIL, and
// count the queries for a name.
package testdns

import (
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Server is a DNS server on 127.0.0.1 (UDP and TCP on one port).
type Server struct {
	Addr string // "127.0.0.1:port"

	mu       sync.Mutex
	ttl      uint32
	txt      map[string][]string
	caa      map[string][]*dns.CAA
	ptr      map[string][]string
	addrs    map[string][]net.IP
	servfail map[string]bool
	nxdomain map[string]bool
	queries  map[string]int
	udp, tcp *dns.Server
}

// Start runs a server until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{txt: map[string][]string{}, caa: map[string][]*dns.CAA{}, servfail: map[string]bool{}, nxdomain: map[string]bool{},
		ptr: map[string][]string{}, addrs: map[string][]net.IP{}, queries: map[string]int{}}
	// UDP and TCP must share a port number; the kernel picks the UDP one,
	// and under parallel tests its TCP twin may already be taken: retry.
	var (
		pc  net.PacketConn
		ln  net.Listener
		err error
	)
	for attempt := 0; attempt < 20; attempt++ {
		pc, err = net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("testdns: %v", err)
		}
		ln, err = net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			break
		}
		pc.Close()
	}
	if err != nil {
		t.Fatalf("testdns: no port free for both UDP and TCP: %v", err)
	}
	s.Addr = pc.LocalAddr().String()
	s.udp = &dns.Server{PacketConn: pc, Handler: s}
	s.tcp = &dns.Server{Listener: ln, Handler: s}
	for _, srv := range []*dns.Server{s.udp, s.tcp} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go func(srv *dns.Server) { _ = srv.ActivateAndServe() }(srv)
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			t.Fatal("testdns: server did not start")
		}
	}
	t.Cleanup(func() { _ = s.udp.Shutdown(); _ = s.tcp.Shutdown() })
	return s
}

func fqdn(name string) string { return dns.Fqdn(strings.ToLower(name)) }

// SetTXT replaces the TXT records of name (nil removes them).
func (s *Server) SetTXT(name string, values ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(values) == 0 {
		delete(s.txt, fqdn(name))
		return
	}
	s.txt[fqdn(name)] = values
}

// SetCAA replaces the CAA records of name, e.g. SetCAA("example.test", 0, "issue", "hallmark.test").
func (s *Server) SetCAA(name string, flag uint8, tag, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.caa[fqdn(name)] = append(s.caa[fqdn(name)], &dns.CAA{Flag: flag, Tag: tag, Value: value})
}

// SetPTR replaces the PTR names of the address addr (nil removes them).
func (s *Server) SetPTR(addr string, names ...string) {
	rev, err := dns.ReverseAddr(addr)
	if err != nil {
		panic("testdns: SetPTR of " + addr + ": " + err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ptr[rev] = nil
	for _, n := range names {
		s.ptr[rev] = append(s.ptr[rev], fqdn(n))
	}
}

// SetAddrs replaces the A and AAAA records of name; the default is A
// 127.0.0.1 and no AAAA.
func (s *Server) SetAddrs(name string, addrs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addrs[fqdn(name)] = []net.IP{}
	for _, a := range addrs {
		s.addrs[fqdn(name)] = append(s.addrs[fqdn(name)], net.ParseIP(a))
	}
}

// SetTTL sets the TTL of every answer from now on (0 by default).
func (s *Server) SetTTL(seconds uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ttl = seconds
}

// Queries is how many queries for name (any type) the server answered.
func (s *Server) Queries(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries[fqdn(name)]
}

// ServFail makes every query for name fail with SERVFAIL.
func (s *Server) ServFail(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.servfail[fqdn(name)] = true
}

// NXDomain makes name not exist.
func (s *Server) NXDomain(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nxdomain[fqdn(name)] = true
}

// ServeDNS answers one query.
func (s *Server) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	if len(req.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		_ = w.WriteMsg(m)
		return
	}
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	s.mu.Lock()
	defer s.mu.Unlock()
	hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: s.ttl, Rrtype: q.Qtype}
	s.queries[name]++
	addrs, set := s.addrs[name]
	switch {
	case s.servfail[name]:
		m.Rcode = dns.RcodeServerFailure
	case s.nxdomain[name]:
		m.Rcode = dns.RcodeNameError
	case (q.Qtype == dns.TypeA || q.Qtype == dns.TypeAAAA) && set:
		for _, ip := range addrs {
			if ip4 := ip.To4(); ip4 != nil && q.Qtype == dns.TypeA {
				m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: ip4})
			} else if ip4 == nil && q.Qtype == dns.TypeAAAA {
				m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: ip})
			}
		}
	case q.Qtype == dns.TypeA:
		m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: net.IPv4(127, 0, 0, 1)})
	case q.Qtype == dns.TypePTR:
		for _, n := range s.ptr[name] {
			m.Answer = append(m.Answer, &dns.PTR{Hdr: hdr, Ptr: n})
		}
	case q.Qtype == dns.TypeTXT:
		for _, v := range s.txt[name] {
			m.Answer = append(m.Answer, &dns.TXT{Hdr: hdr, Txt: []string{v}})
		}
	case q.Qtype == dns.TypeCAA:
		for _, c := range s.caa[name] {
			cc := *c
			cc.Hdr = hdr
			m.Answer = append(m.Answer, &cc)
		}
	}
	_ = w.WriteMsg(m)
}
