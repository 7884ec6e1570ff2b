package relay_test

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/hallmark-ca/hallmark/protocol"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/protocol/serverconf"
	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/signer/relay"
	"github.com/hallmark-ca/hallmark/signer/signerconf"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/tests/knot"
	"github.com/hallmark-ca/hallmark/tests/pebble"
)

// dns01Relay is a relay with challenge_strategy dns01 publishing to ns
// with secret, against the Pebble at p.
func dns01Relay(t *testing.T, p *pebble.Server, ns *knot.Server, secret string) (*relay.Backend, func(...string) (signer.Request, *x509.CertificateRequest)) {
	t.Helper()
	st := journal(t)
	b, err := relay.New(relay.Config{Name: "dns", Journal: st, Timeout: 60 * time.Second,
		Relay: signerconf.Relay{DirectoryURL: p.DirectoryURL, CACert: p.CACert, AccountKey: filepath.Join(t.TempDir(), "account.key"),
			Challenge: "dns-01", ChallengeStrategy: "dns01", DNSServer: ns.Addr, DNSZone: ns.Zone, TSIGKeyName: ns.KeyName,
			TSIGAlgorithm: "hmac-sha256", TSIGSecretFile: knot.SecretFile(t, secret), PropagationWaitSeconds: 10}})
	if err != nil {
		t.Fatal(err)
	}
	return b, func(names ...string) (signer.Request, *x509.CertificateRequest) { return order(t, st, names...) }
}

// txtAt is every TXT value the authoritative server holds at name.
func txtAt(t *testing.T, ns *knot.Server, name string) []string {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), dns.TypeTXT)
	r, _, err := (&dns.Client{Net: "tcp", Timeout: 5 * time.Second}).Exchange(q, ns.Addr)
	if err != nil {
		t.Fatalf("asking %s for %s TXT: %v", ns.Addr, name, err)
	}
	var vals []string
	for _, rr := range r.Answer {
		if txt, ok := rr.(*dns.TXT); ok {
			vals = append(vals, strings.Join(txt.Txt, ""))
		}
	}
	return vals
}

// TestRelayDNS01WithValidatingPebble: against a Pebble that validates,
// resolving through a real authoritative server (knotd) that takes
// TSIG-signed updates, a dns01 relay obtains a certificate for a name and
// a wildcard under another, and leaves no _acme-challenge record behind;
// the same order through a bypass relay (what the relay did before) fails
// with the upstream's verdict.
func TestRelayDNS01WithValidatingPebble(t *testing.T) {
	ns := knot.Start(t, "relay.test")
	p := pebble.StartWith(t, pebble.Options{DNSServer: ns.Addr})
	names := []string{"www.relay.test", "*.wild.relay.test", "wild.relay.test"}

	t.Run("dns01 issues", func(t *testing.T) {
		b, order := dns01Relay(t, p, ns, ns.Secret)
		r, csr := order(names...)
		issued, err := b.Issue(context.Background(), r, csr)
		if err != nil {
			t.Fatalf("Issue: %v", err)
		}
		leaf, _ := x509.ParseCertificate(issued.DER)
		got := slices.Sorted(slices.Values(leaf.DNSNames))
		if want := slices.Sorted(slices.Values(names)); !slices.Equal(got, want) {
			t.Errorf("the upstream certificate names %v, want %v", got, want)
		}
		for _, n := range []string{"_acme-challenge.www.relay.test", "_acme-challenge.wild.relay.test"} {
			if vals := txtAt(t, ns, n); len(vals) != 0 {
				t.Errorf("%s still holds TXT %v after the order: the relay left its records", n, vals)
			}
		}
	})
	t.Run("bypass fails", func(t *testing.T) {
		st := journal(t)
		b, err := relay.New(relay.Config{Name: "bypass", Journal: st, Timeout: 60 * time.Second,
			Relay: signerconf.Relay{DirectoryURL: p.DirectoryURL, CACert: p.CACert, AccountKey: filepath.Join(t.TempDir(), "account.key"), Challenge: "dns-01"}})
		if err != nil {
			t.Fatal(err)
		}
		r, csr := order(t, st, "bypass.relay.test")
		_, err = b.Issue(context.Background(), r, csr)
		var ae *acme.Error
		if !errors.As(err, &ae) || ae.Problem.Type != acme.ProblemUnauthorized {
			t.Fatalf("Issue through a bypass relay against a validating upstream: %v, want the upstream's unauthorized", err)
		}
	})
}

// TestRelayDNS01WrongTSIGKey: a TSIG secret the server does not know fails
// the order with a problem that names the TSIG settings to check, not a
// retry, and the server holds no record.
func TestRelayDNS01WrongTSIGKey(t *testing.T) {
	ns := knot.Start(t, "relay.test")
	p := pebble.StartWith(t, pebble.Options{DNSServer: ns.Addr})
	wrong := make([]byte, 32)
	_, _ = rand.Read(wrong)
	b, order := dns01Relay(t, p, ns, base64.StdEncoding.EncodeToString(wrong))
	r, csr := order("wrongkey.relay.test")
	_, err := b.Issue(context.Background(), r, csr)
	var ae *acme.Error
	if !errors.As(err, &ae) || errors.Is(err, signer.ErrUnavailable) || !strings.Contains(ae.Problem.Detail, "tsig_secret_file") {
		t.Fatalf("Issue with a wrong TSIG key: %v, want a problem naming the TSIG settings, not a retry", err)
	}
	if vals := txtAt(t, ns, "_acme-challenge.wrongkey.relay.test"); len(vals) != 0 {
		t.Errorf("the server holds TXT %v after a refused update", vals)
	}
}

// TestRelayUpstreamEAB: an upstream that requires external account binding
// registers the relay's account with eab_kid and eab_hmac_key_file, and
// issues; without them the registration is refused.
func TestRelayUpstreamEAB(t *testing.T) {
	hmacKey := make([]byte, 32)
	_, _ = rand.Read(hmacKey)
	encoded := base64.RawURLEncoding.EncodeToString(hmacKey)
	p := pebble.StartWith(t, pebble.Options{EABKeys: map[string]string{"kid-relay": encoded}})
	keyFile := filepath.Join(t.TempDir(), "eab.key")
	if err := os.WriteFile(keyFile, []byte(encoded+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		kid, key string
		ok       bool
	}{
		{"without a binding", "", "", false},
		{"with the binding", "kid-relay", keyFile, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := journal(t)
			b, err := relay.New(relay.Config{Name: "eab", Journal: st, Timeout: 30 * time.Second,
				Relay: signerconf.Relay{DirectoryURL: p.DirectoryURL, CACert: p.CACert, AccountKey: filepath.Join(t.TempDir(), "account.key"),
					EABKID: tc.kid, EABHMACKeyFile: tc.key}})
			if err != nil {
				t.Fatal(err)
			}
			r, csr := order(t, st, "eab.example.test")
			_, err = b.Issue(context.Background(), r, csr)
			if tc.ok && err != nil {
				t.Fatalf("Issue with the binding: %v", err)
			}
			if !tc.ok && (err == nil || !strings.Contains(err.Error(), "externalAccountRequired")) {
				t.Fatalf("Issue without a binding against an upstream requiring one: %v, want externalAccountRequired", err)
			}
		})
	}
}

// TestRelayDNS01InvalidAuthorizationCleansUp: when the upstream cannot see
// the record (it resolves through another server), the authorization
// becomes invalid, the order fails with the upstream's verdict, and the
// relay still removes the record it published.
func TestRelayDNS01InvalidAuthorizationCleansUp(t *testing.T) {
	ns, elsewhere := knot.Start(t, "relay.test"), knot.Start(t, "relay.test")
	p := pebble.StartWith(t, pebble.Options{DNSServer: elsewhere.Addr})
	b, order := dns01Relay(t, p, ns, ns.Secret)
	r, csr := order("unseen.relay.test")
	_, err := b.Issue(context.Background(), r, csr)
	var ae *acme.Error
	if !errors.As(err, &ae) || ae.Problem.Type != acme.ProblemUnauthorized {
		t.Fatalf("Issue with the record out of the upstream's sight: %v, want the upstream's unauthorized", err)
	}
	if vals := txtAt(t, ns, "_acme-challenge.unseen.relay.test"); len(vals) != 0 {
		t.Errorf("the server still holds TXT %v after the authorization became invalid", vals)
	}
}

// TestRelayHTTP01WithValidatingPebble: against a Pebble that validates
// http-01, resolving the names through knotd to loopback and connecting to
// the port of Hallmark's real public http handler (the frontend's
// public_http_listen) on the same database, an http01 relay issues: the
// worker side stores each token's answer, the frontend serves it, and it
// is gone afterwards. The frontend is built without the relay's account
// key. A bypass relay fails against the same upstream.
func TestRelayHTTP01WithValidatingPebble(t *testing.T) {
	ns := knot.Start(t, "relay.test")
	st := journal(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fcfg := protocol.Config{Server: serverconf.DefaultServer(), Profiles: map[string]profile.Profile{"default": profile.Default()}, DefaultProfile: "default"}
	fcfg.Server.BaseURL = "http://" + ln.Addr().String()
	srv, err := protocol.New(fcfg, st, protocol.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	public := &http.Server{Handler: srv.PublicHandler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = public.Serve(ln) }()
	t.Cleanup(func() { _ = public.Close() })
	p := pebble.StartWith(t, pebble.Options{DNSServer: ns.Addr, HTTPPort: ln.Addr().(*net.TCPAddr).Port})
	tokens := &countingTokens{Tokens: st}

	for _, strategy := range []string{"http01", "bypass"} {
		t.Run(strategy, func(t *testing.T) {
			b, err := relay.New(relay.Config{Name: "web", Journal: st, Tokens: tokens, Timeout: 60 * time.Second,
				Relay: signerconf.Relay{DirectoryURL: p.DirectoryURL, CACert: p.CACert, AccountKey: filepath.Join(t.TempDir(), "account.key"),
					Challenge: "http-01", ChallengeStrategy: strategy}})
			if err != nil {
				t.Fatal(err)
			}
			r, csr := order(t, st, strategy+".relay.test", "www."+strategy+".relay.test")
			_, err = b.Issue(context.Background(), r, csr)
			if strategy == "bypass" {
				var ae *acme.Error
				if !errors.As(err, &ae) || ae.Problem.Type != acme.ProblemUnauthorized {
					t.Fatalf("Issue through a bypass relay against a validating upstream: %v, want unauthorized", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Issue: %v", err)
			}
			put := tokens.list()
			if len(put) != 2 {
				t.Fatalf("%d http-01 answers stored, want one per name", len(put))
			}
			for _, tok := range put {
				if _, err := st.RelayTokenGet(context.Background(), tok); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("the answer for token %s is still stored after the order: %v", tok, err)
				}
			}
		})
	}
}

// countingTokens records the tokens the relay stores answers for.
type countingTokens struct {
	relay.Tokens
	mu   sync.Mutex
	toks []string
}

func (c *countingTokens) RelayTokenPut(ctx context.Context, backend, token, ka string, ttl time.Duration) error {
	c.mu.Lock()
	c.toks = append(c.toks, token)
	c.mu.Unlock()
	return c.Tokens.RelayTokenPut(ctx, backend, token, ka, ttl)
}

func (c *countingTokens) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.toks...)
}
