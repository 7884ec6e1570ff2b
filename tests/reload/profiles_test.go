package reload

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	xacme "golang.org/x/crypto/acme"

	"github.com/hallmark-ca/hallmark/tests/harness"
)

// shortTOML is a second local profile, "short", at 50 hours.
const shortTOML = `
[profiles.short]
backend = "local"
validity_hours = 50
key_types = ["p256", "rsa2048"]
challenges = ["http-01"]
identifier_types = ["dns"]
`

// TestReloadAddsAndRemovesProfile: a profile added to the file is served
// after SIGHUP (its own directory, the directory's meta.profiles) and its
// certificate comes from a worker that works its queue from then on, lego
// ordering through its directory URL while clients ask throughout and no
// request fails. Removed again, newOrder refuses it with invalidProfile
// and its directory is gone, while an order placed under it before the
// removal is still finalized and signed under it.
func TestReloadAddsAndRemovesProfile(t *testing.T) {
	for _, d := range harness.Dialects {
		t.Run(d.Name, func(t *testing.T) {
			ca := startCA(t, d.URL(t))
			hc := ca.HTTPClient()
			if code := status(t, hc, ca.BaseURL+"/profile/short/directory"); code != http.StatusNotFound {
				t.Fatalf("before the reload /profile/short/directory answers %d, want 404", code)
			}
			edit(t, ca, func(s string) string { return s + shortTOML })

			tr := startTraffic(t, ca, 4)
			hangup(t, ca)
			c, err := legoAt(t, ca, ca.BaseURL+"/profile/short/directory", "added."+d.Name+".test")
			tr.end(t)
			if err != nil {
				t.Fatalf("lego through the added profile's directory: %v\nworker:\n%s", err, harness.Tail(ca.Log("worker"), 3000))
			}
			wantValidity(t, c, 50)
			if got := offered(t, ca); !strings.Contains(got, "short") {
				t.Fatalf("the directory's meta.profiles after adding short: %s", got)
			}
			if ready := readyz(t, ca); !strings.Contains(ready, "profile short: mounted") {
				t.Fatalf("the worker's /readyz after adding short:\n%s", ready)
			}

			// An order under short made ready before short is removed.
			acct := account(t, ca)
			answers := serveHTTP01(t, ca)
			pending := readyOrder(t, acct, answers, "short", "placed."+d.Name+".test")

			edit(t, ca, replace(shortTOML, ""))
			hangup(t, ca)
			for _, p := range []string{"frontend", "worker"} {
				if a, r := outcomes(ca, p); a != 2 || r != 0 {
					t.Fatalf("%s: %d reloads applied, %d refused; want 2 applied\n%s", p, a, r, harness.Tail(ca.Log(p), 3000))
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			_, err = acct.AuthorizeOrder(ctx, xacme.DomainIDs("refused."+d.Name+".test"), xacme.WithOrderIssuanceProfile("short"))
			var ae *xacme.Error
			if !errors.As(err, &ae) || ae.ProblemType != "urn:ietf:params:acme:error:invalidProfile" || ae.StatusCode != http.StatusBadRequest {
				t.Fatalf("newOrder for the removed profile: %v, want a 400 invalidProfile problem", err)
			}
			t.Logf("newOrder for the removed profile: %v", err)
			if code := status(t, hc, ca.BaseURL+"/profile/short/directory"); code != http.StatusNotFound {
				t.Fatalf("after the removal /profile/short/directory answers %d, want 404", code)
			}
			if got := offered(t, ca); strings.Contains(got, "short") {
				t.Fatalf("the directory still offers the removed profile: %s", got)
			}
			wantValidity(t, finalize(t, acct, pending, "placed."+d.Name+".test"), 50)
			wantValidity(t, finalize(t, acct, readyOrder(t, acct, answers, "default", "default."+d.Name+".test"), "default."+d.Name+".test"), 100)
		})
	}
}

func status(t *testing.T, hc *http.Client, u string) int {
	t.Helper()
	resp, err := hc.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// offered is the directory's meta.profiles, as JSON.
func offered(t *testing.T, ca *harness.CA) string {
	t.Helper()
	resp, err := ca.HTTPClient().Get(ca.BaseURL + "/directory")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var dir struct {
		Meta struct {
			Profiles json.RawMessage `json:"profiles"`
		} `json:"meta"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&dir); err != nil {
		t.Fatal(err)
	}
	return string(dir.Meta.Profiles)
}

// readyz is the worker's /readyz body.
func readyz(t *testing.T, ca *harness.CA) string {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + ca.Health + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// legoAt orders a certificate for name over http-01 with a fresh account
// at the directory dir.
func legoAt(t *testing.T, ca *harness.CA, dir, name string) (*x509.Certificate, error) {
	t.Helper()
	path := t.TempDir()
	l := harness.Lego{Bin: harness.RequireTool(t, "lego", "apt-get install lego"), Directory: dir,
		Root: ca.Root, Email: "reload@hallmark.test", Path: path}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, err := l.Run(ctx, "--domains", name, "--key-type", "ec256", "--http", "--http.port", fmt.Sprintf("127.0.0.1:%d", ca.HTTPPort), "run")
	if err != nil {
		return nil, fmt.Errorf("lego run for %s: %v\n%s", name, err, out)
	}
	return harness.ReadCert(t, path+"/certificates/"+name+".crt"), nil
}

// account registers a new account at ca with x/crypto/acme, which can
// name a profile in newOrder.
func account(t *testing.T, ca *harness.CA) *xacme.Client {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	c := &xacme.Client{Key: key, DirectoryURL: ca.BaseURL + "/directory", HTTPClient: ca.HTTPClient()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Register(ctx, &xacme.Account{}, xacme.AcceptTOS); err != nil {
		t.Fatalf("registering an account: %v", err)
	}
	return c
}

// http01 answers http-01 on the CA's http port from a token map.
type http01 struct {
	mu  sync.Mutex
	key map[string]string
}

func (h *http01) set(token, keyAuth string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.key[token] = keyAuth
}

func serveHTTP01(t *testing.T, ca *harness.CA) *http01 {
	t.Helper()
	h := &http01{key: map[string]string{}}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", ca.HTTPPort))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		ka, ok := h.key[strings.TrimPrefix(r.URL.Path, "/.well-known/acme-challenge/")]
		h.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, ka)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return h
}

// readyOrder places an order for name under profile and answers its
// http-01 challenge, returning it once ready to finalize.
func readyOrder(t *testing.T, c *xacme.Client, h *http01, profile, name string) *xacme.Order {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	o, err := c.AuthorizeOrder(ctx, xacme.DomainIDs(name), xacme.WithOrderIssuanceProfile(xacme.ProfileName(profile)))
	if err != nil {
		t.Fatalf("newOrder under %s: %v", profile, err)
	}
	for _, u := range o.AuthzURLs {
		z, err := c.GetAuthorization(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range z.Challenges {
			if ch.Type != "http-01" {
				continue
			}
			ka, err := c.HTTP01ChallengeResponse(ch.Token)
			if err != nil {
				t.Fatal(err)
			}
			h.set(ch.Token, ka)
			if _, err := c.Accept(ctx, ch); err != nil {
				t.Fatalf("accepting http-01: %v", err)
			}
		}
		if _, err := c.WaitAuthorization(ctx, u); err != nil {
			t.Fatalf("authorization of %s: %v", name, err)
		}
	}
	ready, err := c.WaitOrder(ctx, o.URI)
	if err != nil {
		t.Fatalf("waiting for order %s to be ready: %v", o.URI, err)
	}
	return ready
}

// finalize sends a CSR for name and returns the certificate issued.
func finalize(t *testing.T, c *xacme.Client, o *xacme.Order, name string) *x509.Certificate {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	csr, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{DNSNames: []string{name}}, key)
	chain, _, err := c.CreateOrderCert(ctx, o.FinalizeURL, csr, true)
	var ae *xacme.Error
	if err != nil && !errors.As(err, &ae) {
		fo, werr := c.WaitOrder(ctx, o.URI)
		if werr != nil {
			t.Fatalf("waiting for the certificate of %s: %v", o.URI, werr)
		}
		chain, err = c.FetchCert(ctx, fo.CertURL, true)
	}
	if err != nil {
		t.Fatalf("finalizing %s: %v", o.URI, err)
	}
	cert, err := x509.ParseCertificate(chain[0])
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
