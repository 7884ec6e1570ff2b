package main

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// tokenStore holds the http-01 key authorizations the generator's own
// responder serves (RFC 8555 §8.3).
type tokenStore struct{ m sync.Map }

func (t *tokenStore) put(token, keyAuth string) { t.m.Store(token, keyAuth) }
func (t *tokenStore) drop(token string)         { t.m.Delete(token) }

const challengePrefix = "/.well-known/acme-challenge/"

func (t *tokenStore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	token, ok := strings.CutPrefix(r.URL.Path, challengePrefix)
	if !ok {
		http.NotFound(w, r)
		return
	}
	ka, ok := t.m.Load(token)
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	fmt.Fprint(w, ka.(string))
}

// responders are the generator's loopback services a CA validates against:
// the http-01 responder and a DNS server that answers A 127.0.0.1 for
// every name and nothing else (no AAAA, no CAA, no TXT), so every name is
// this host and issuance is permitted.
type responders struct {
	Tokens   *tokenStore
	HTTPPort int
	DNSAddr  string
	close    func()
}

func startResponders(httpAddr, dnsAddr string) (*responders, error) {
	r := &responders{Tokens: &tokenStore{}}
	hl, err := net.Listen("tcp", httpAddr)
	if err != nil {
		return nil, fmt.Errorf("listening for http-01: %w", err)
	}
	r.HTTPPort = hl.Addr().(*net.TCPAddr).Port
	hs := &http.Server{Handler: r.Tokens, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(hl) }()

	pc, tl, err := listenDNS(dnsAddr)
	if err != nil {
		hl.Close()
		return nil, err
	}
	r.DNSAddr = pc.LocalAddr().String()
	servers := []*dns.Server{
		{PacketConn: pc, Handler: dns.HandlerFunc(answerLoopback)},
		{Listener: tl, Handler: dns.HandlerFunc(answerLoopback)},
	}
	for _, s := range servers {
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		go func(s *dns.Server) { _ = s.ActivateAndServe() }(s)
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			return nil, fmt.Errorf("the DNS server on %s did not start", r.DNSAddr)
		}
	}
	r.close = func() {
		_ = hs.Close()
		for _, s := range servers {
			_ = s.Shutdown()
		}
	}
	return r, nil
}

func (r *responders) Close() { r.close() }

func answerLoopback(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	for _, q := range req.Question {
		if q.Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{
				Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
				A:   net.IPv4(127, 0, 0, 1),
			})
		}
	}
	_ = w.WriteMsg(m)
}

// listenDNS listens on one port for DNS over UDP and TCP. With port 0 the
// kernel picks the UDP port, which another process may hold for TCP: then
// it tries another.
func listenDNS(addr string) (net.PacketConn, net.Listener, error) {
	for attempt := 0; ; attempt++ {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("listening for DNS: %w", err)
		}
		tl, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, tl, nil
		}
		pc.Close()
		if _, port, _ := net.SplitHostPort(addr); port != "0" || attempt == 9 {
			return nil, nil, fmt.Errorf("listening for DNS over TCP: %w", err)
		}
	}
}
