package main

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// startDevDNS runs a tiny authoritative DNS server for `hallmark up`: every
// name under .localhost (RFC 6761) has A 127.0.0.1 (IPv4 only, so the
// worker dials what a client's listener on 0.0.0.0 serves) and no CAA record (so issuance is permitted). Everything else is NXDOMAIN. It lets
// the worker validate http-01 and tls-alpn-01 on a machine with no network,
// through the same resolver code it uses in production.
func startDevDNS(addr string) (*dns.Server, error) {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("starting the dev DNS server on %s: %w", addr, err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(answerLocalhost)}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		return nil, fmt.Errorf("the dev DNS server on %s did not start", addr)
	}
	return srv, nil
}

func answerLocalhost(w dns.ResponseWriter, req *dns.Msg) {
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
	if name != "localhost." && !strings.HasSuffix(name, ".localhost.") {
		m.Rcode = dns.RcodeNameError
		_ = w.WriteMsg(m)
		return
	}
	hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: 60}
	switch q.Qtype {
	case dns.TypeA:
		hdr.Rrtype = dns.TypeA
		m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: net.IPv4(127, 0, 0, 1)})
	}
	_ = w.WriteMsg(m)
}
