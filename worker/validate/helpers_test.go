package validate

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

const (
	testToken   = "LoqXcYV8q5ONbJQxbmR7SCTNo3tiAXDfowyjxAjEuX0"
	testKeyAuth = testToken + ".9jg46WB3rR_AHD-EBXdN7cBkH1WOu0tA3M9fm21mqTI"
	testAccount = "https://ca.hallmark.test/acme/acct/42"
	testCAA     = "hallmark.test"
)

// testDNS is a real authoritative-style DNS server on 127.0.0.1 (UDP and TCP
// on one port). It answers from records the test sets; a CNAME is returned
// alone, so the validator has to follow it with a new query.
type testDNS struct {
	Addr string

	mu      sync.Mutex
	records map[string][]dns.RR // by canonical owner name
	rcodes  map[string]int      // forced RCODE for every question about a name
	silent  map[string]bool     // never answer questions about a name

	// caaHeld, when set, holds every CAA answer until CAA questions about
	// that many names have arrived (holdCAA).
	caaHeld  int
	caaAsked map[string]bool
	caaAll   chan struct{}
}

// holdCAA makes the server answer no CAA question until it has been asked
// about n distinct names; until then it stays silent, and a resolver that
// waits for one answer before its next question times out.
func (d *testDNS) holdCAA(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.caaHeld, d.caaAsked, d.caaAll = n, map[string]bool{}, make(chan struct{})
}

func newTestDNS(t *testing.T) *testDNS {
	t.Helper()
	d := &testDNS{records: map[string][]dns.RR{}, rcodes: map[string]int{}, silent: map[string]bool{}}
	var pc net.PacketConn
	var ln net.Listener
	for i := 0; ; i++ {
		var err error
		pc, err = net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("listening on udp: %v", err)
		}
		ln, err = net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			break
		}
		pc.Close()
		if i == 10 {
			t.Fatalf("no port free on both udp and tcp: %v", err)
		}
	}
	d.Addr = pc.LocalAddr().String()
	handler := dns.HandlerFunc(d.serve)
	for _, s := range []*dns.Server{{PacketConn: pc, Handler: handler}, {Listener: ln, Handler: handler}} {
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		go func() { _ = s.ActivateAndServe() }()
		<-started
		t.Cleanup(func() { _ = s.Shutdown() })
	}
	return d
}

func (d *testDNS) serve(w dns.ResponseWriter, req *dns.Msg) {
	if len(req.Question) != 1 {
		return
	}
	q := req.Question[0]
	name := dns.CanonicalName(q.Name)
	d.mu.Lock()
	silent, rcode, forced := d.silent[name], 0, false
	if rc, ok := d.rcodes[name]; ok {
		rcode, forced = rc, true
	}
	rrs := append([]dns.RR(nil), d.records[name]...)
	held := d.caaAll
	if held != nil && q.Qtype == dns.TypeCAA && !d.caaAsked[name] {
		d.caaAsked[name] = true
		if len(d.caaAsked) == d.caaHeld {
			close(d.caaAll)
		}
	}
	d.mu.Unlock()
	if silent {
		return
	}
	if held != nil && q.Qtype == dns.TypeCAA {
		select {
		case <-held:
		case <-time.After(10 * time.Second):
			return
		}
	}
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	switch {
	case forced:
		m.Rcode = rcode
	case len(rrs) == 0:
		m.Rcode = dns.RcodeNameError
	default:
		for _, rr := range rrs {
			if rr.Header().Rrtype == q.Qtype || rr.Header().Rrtype == dns.TypeCNAME {
				m.Answer = append(m.Answer, rr)
			}
		}
	}
	_ = w.WriteMsg(m)
}

// add parses zone-file lines ("example.test. CAA 0 issue \"x\"") and serves them.
func (d *testDNS) add(t *testing.T, lines ...string) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, line := range lines {
		rr, err := dns.NewRR(line)
		if err != nil {
			t.Fatalf("bad test record %q: %v", line, err)
		}
		name := dns.CanonicalName(rr.Header().Name)
		d.records[name] = append(d.records[name], rr)
	}
}

// host serves A 127.0.0.1 for each name.
func (d *testDNS) host(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		d.add(t, n+". 60 IN A 127.0.0.1")
	}
}

func (d *testDNS) rcode(name string, rc int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rcodes[dns.CanonicalName(name)] = rc
}

func (d *testDNS) blackhole(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.silent[dns.CanonicalName(name)] = true
}

// testConfig points a validator at d and nothing else.
func testConfig(d *testDNS) Config {
	return Config{
		Resolvers:     []string{d.Addr},
		HTTPPort:      closedPort(),
		HTTPSPort:     closedPort(),
		TLSALPNPort:   closedPort(),
		Timeout:       5 * time.Second,
		CAAIdentities: []string{testCAA},
	}
}

// closedPort is a loopback port where nothing listens (bound then released).
func closedPort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(strings.TrimPrefix(strings.TrimPrefix(addr, "http://"), "https://"))
	if err != nil {
		t.Fatalf("no port in %q: %v", addr, err)
	}
	n, _ := strconv.Atoi(p)
	return n
}

// serveHTTP starts a loopback HTTP server (or HTTPS with tlsOn) and returns its port.
func serveHTTP(t *testing.T, h http.Handler, tlsOn bool) int {
	t.Helper()
	var s *httptest.Server
	if tlsOn {
		s = httptest.NewTLSServer(h)
	} else {
		s = httptest.NewServer(h)
	}
	t.Cleanup(s.Close)
	return portOf(t, s.URL)
}

// blackHole accepts connections and never answers; it returns its port.
func blackHole(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().(*net.TCPAddr).Port
}

// alpnCert describes the certificate a test tls-alpn-01 responder presents.
type alpnCert struct {
	dnsNames    []string
	ips         []net.IP
	rawIP       []byte // the one iPAddress SAN's octets as given (crypto/x509 writes an IPv4 address in 4)
	digest      []byte // nil: the right digest of testKeyAuth
	noExtension bool
	notCritical bool
}

func (c alpnCert) build(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "acme-tls-alpn-01 test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		DNSNames:     c.dnsNames,
		IPAddresses:  c.ips,
	}
	if c.rawIP != nil {
		value, err := asn1.Marshal([]asn1.RawValue{{Class: asn1.ClassContextSpecific, Tag: 7, Bytes: c.rawIP}})
		if err != nil {
			t.Fatal(err)
		}
		tmpl.ExtraExtensions = append(tmpl.ExtraExtensions, pkix.Extension{Id: oidSubjectAltName, Value: value})
	}
	if !c.noExtension {
		digest := c.digest
		if digest == nil {
			sum := sha256.Sum256([]byte(testKeyAuth))
			digest = sum[:]
		}
		value, err := asn1.Marshal(digest)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.ExtraExtensions = append(tmpl.ExtraExtensions, pkix.Extension{Id: oidACMEIdentifier, Critical: !c.notCritical, Value: value})
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// serveALPN starts a loopback TLS responder with the given certificate and
// ALPN protocols; it fails handshakes whose SNI is not wantSNI (when set).
func serveALPN(t *testing.T, cert tls.Certificate, protos []string, wantSNI string) int {
	t.Helper()
	cfg := &tls.Config{
		NextProtos: protos,
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if wantSNI != "" && hello.ServerName != wantSNI {
				return nil, errors.New("unexpected SNI " + hello.ServerName)
			}
			return &cert, nil
		},
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				_ = c.(*tls.Conn).Handshake()
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

func dnsID(name string) acme.Identifier {
	return acme.Identifier{Type: acme.IdentifierDNS, Value: name}
}
func ipID(addr string) acme.Identifier { return acme.Identifier{Type: acme.IdentifierIP, Value: addr} }

// checkResult fails unless res is a verdict (no Err: the attempt ran) whose
// problem is as checkProblem wants.
func checkResult(t *testing.T, res Result, want acme.ProblemType, mentions ...string) {
	t.Helper()
	if res.Err != nil {
		t.Fatalf("want a verdict (%q), got no verdict: the attempt could not run: %v", want, res.Err)
	}
	checkProblem(t, res.Problem, want, mentions...)
}

// checkProblem fails unless p has type want (nil for success) and its detail
// contains every one of mentions.
func checkProblem(t *testing.T, p *acme.Problem, want acme.ProblemType, mentions ...string) {
	t.Helper()
	if want == "" {
		if p != nil {
			t.Fatalf("want success, got %s: %s", p.Type, p.Detail)
		}
		return
	}
	if p == nil {
		t.Fatalf("want a %s problem, got success", want)
	}
	if p.Type != want {
		t.Fatalf("want a %s problem, got %s: %s", want, p.Type, p.Detail)
	}
	for _, m := range mentions {
		if !strings.Contains(p.Detail, m) {
			t.Errorf("problem detail %q does not mention %q", p.Detail, m)
		}
	}
}
