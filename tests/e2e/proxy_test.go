package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hallmark-ca/hallmark/tests/harness"
)

// hop is how the proxy passes requests on: from which loopback address it
// connects to the frontend, and the X-Forwarded-For it adds ("" none).
type hop struct {
	src string
	xff string
}

var (
	trustedProxy   = hop{src: "127.0.0.2", xff: "127.0.0.1"} // the trusted proxy, for the lab client 127.0.0.1
	untrustedProxy = hop{src: "127.0.0.3", xff: "127.0.0.1"} // a proxy the CA does not trust, claiming the same
)

// direct is a client at src talking to the frontend itself.
func direct(src string) hop { return hop{src: src} }

// proxy is a reverse proxy (net/http/httputil) on 127.0.0.2 in front of a
// CA's frontend: every client talks to it (server.base_url points here),
// and it connects to the frontend from the address its current hop says,
// so the frontend sees the peer and the X-Forwarded-For the test chooses.
// It presents the frontend's own certificate, issued for 127.0.0.2 too.
type proxy struct {
	URL string
	ln  net.Listener

	mu         sync.Mutex
	hop        hop
	transports map[string]*http.Transport
}

// listenProxy reserves the proxy's address; serve starts it once the CA,
// whose certificate it presents, exists.
func listenProxy(t *testing.T) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatalf("listening on 127.0.0.2: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	return &proxy{URL: "https://" + ln.Addr().String(), ln: ln, transports: map[string]*http.Transport{}, hop: trustedProxy}
}

func (p *proxy) serve(t *testing.T, ca *CA) {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(ca.Dir, "frontend.pem"), filepath.Join(ca.Dir, "frontend.key"))
	if err != nil {
		t.Fatal(err)
	}
	rootPEM, err := os.ReadFile(ca.Root)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(rootPEM)
	target, _ := url.Parse(ca.BaseURL) // the frontend's own listener
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			if h := p.current(); h.xff != "" {
				pr.Out.Header.Set("X-Forwarded-For", h.xff)
			}
		},
		Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
			return p.transport(p.current().src, roots).RoundTrip(r)
		}),
	}
	srv := &http.Server{Handler: rp, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	go func() { _ = srv.ServeTLS(p.ln, "", "") }()
	t.Cleanup(func() { srv.Close() })
}

// via makes the proxy pass requests on as h until the next call.
func (p *proxy) via(h hop) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hop = h
}

func (p *proxy) current() hop {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hop
}

// transport is the connection pool from src: one per source address, so
// a connection kept alive never carries a request of another hop.
func (p *proxy) transport(src string, roots *x509.CertPool) *http.Transport {
	p.mu.Lock()
	defer p.mu.Unlock()
	if tr, ok := p.transports[src]; ok {
		return tr
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	tr := &http.Transport{DialContext: d.DialContext, TLSClientConfig: &tls.Config{RootCAs: roots}}
	p.transports[src] = tr
	return tr
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// startBehindProxy starts a CA whose clients all come through a proxy, with
// further TOML tables.
func startBehindProxy(t *testing.T, dbURL, tables string) (*CA, *proxy) {
	t.Helper()
	p := listenProxy(t)
	ca := harness.StartCA(t, dbURL, harness.Options{
		Tables:   tables,
		Server:   "base_url = \"" + p.URL + "\"",
		InitArgs: []string{"--tls-names", "localhost,127.0.0.1,127.0.0.2,::1"},
	})
	p.serve(t, ca)
	return ca, p
}
