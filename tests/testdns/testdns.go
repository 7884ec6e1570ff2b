// Package testdns runs a real DNS server (miekg/dns) on loopback for tests:
// by default every name has A 127.0.0.1 and nothing else; a test can set TXT
// and CAA records, make a name NXDOMAIN or SERVFAIL, and see every query.
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
	txt      map[string][]string
	caa      map[string][]*dns.CAA
	servfail map[string]bool
	nxdomain map[string]bool
	udp, tcp *dns.Server
}

// Start runs a server until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{txt: map[string][]string{}, caa: map[string][]*dns.CAA{}, servfail: map[string]bool{}, nxdomain: map[string]bool{}}
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
	hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: 0, Rrtype: q.Qtype}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.servfail[name]:
		m.Rcode = dns.RcodeServerFailure
	case s.nxdomain[name]:
		m.Rcode = dns.RcodeNameError
	case q.Qtype == dns.TypeA:
		m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: net.IPv4(127, 0, 0, 1)})
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
