package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	xacme "golang.org/x/crypto/acme"

	"github.com/hallmark-ca/hallmark/tests/harness"
	"github.com/hallmark-ca/hallmark/tests/signeddns"
	"github.com/hallmark-ca/hallmark/tests/unbound"
)

// TestDNSSECRequire runs the real binaries with challenge.dnssec =
// "require", resolving through real unbound anchored at a zone the test
// signs: a name in the signed zone gets a certificate over dns-01; a name
// in an unsigned zone is refused with a dns problem saying the answer was
// not DNSSEC-validated; a signed name whose CAA denial is bogus is refused
// with a dns problem saying DNSSEC validation failed, though its TXT
// record is right.
func TestDNSSECRequire(t *testing.T) {
	secure := signeddns.NewZone("secure.test.", true)
	secure.Add(`@ CAA 0 issue "hallmark.test"`) // the harness's server.caa_identities
	plain := signeddns.NewZone("plain.test.", false)
	auth := signeddns.Start(t, signeddns.NewZone("test.", false), secure, plain)
	res := unbound.Start(t, unbound.Config{
		Stubs:        map[string]string{"test.": auth.Addr, "secure.test.": auth.Addr, "plain.test.": auth.Addr},
		TrustAnchors: []string{secure.TrustAnchor()},
	})
	for _, d := range dialects {
		t.Run(d.Name, func(t *testing.T) {
			ca := harness.StartCA(t, d.URL(t), harness.Options{Resolver: res.Addr, Challenge: `dnssec = "require"`})
			c := acmeAccount(t, ca)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()

			name := d.Name + ".secure.test"
			secure.Add(name + ". A 127.0.0.1")
			o, ch := answerDNS01(ctx, t, c, name, func(rr string) { secure.Add(rr) })
			if ch.Status != xacme.StatusValid {
				t.Fatalf("dns-01 for %s in the signed zone: %s, %v", name, ch.Status, ch.Error)
			}
			if _, err := c.WaitOrder(ctx, o.URI); err != nil {
				t.Fatalf("order for %s: %v", name, err)
			}
			key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			csr, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{DNSNames: []string{name}}, key)
			if _, _, err := c.CreateOrderCert(ctx, o.FinalizeURL, csr, true); err != nil {
				t.Fatalf("finalize for %s: %v", name, err)
			}

			for _, tc := range []struct{ name, want string }{
				{d.Name + ".plain.test", "answer not DNSSEC-validated looking up TXT for _acme-challenge." + d.Name + ".plain.test"},
				{"nocaa-" + d.Name + ".secure.test", "While checking CAA for nocaa-" + d.Name + ".secure.test: DNS problem: DNSSEC validation failed"},
			} {
				zone := plain
				if strings.HasSuffix(tc.name, ".secure.test") {
					zone = secure
					zone.Bogus(tc.name + ".") // its CAA NODATA proof
				}
				zone.Add(tc.name + ". A 127.0.0.1")
				_, ch := answerDNS01(ctx, t, c, tc.name, func(rr string) { zone.Add(rr) })
				var prob *xacme.Error
				if ch.Status != xacme.StatusInvalid || !errors.As(ch.Error, &prob) ||
					prob.ProblemType != "urn:ietf:params:acme:error:dns" || !strings.Contains(prob.Detail, tc.want) {
					t.Errorf("dns-01 for %s: %s, %v; want invalid with a dns problem saying %q", tc.name, ch.Status, ch.Error, tc.want)
				}
			}
		})
	}
}

// answerDNS01 orders name, publishes its dns-01 record with add (a
// zone-file line), answers the challenge and returns the order and the
// challenge once the authorization is final.
func answerDNS01(ctx context.Context, t *testing.T, c *xacme.Client, name string, add func(rr string)) (*xacme.Order, *xacme.Challenge) {
	t.Helper()
	o, err := c.AuthorizeOrder(ctx, xacme.DomainIDs(name))
	if err != nil {
		t.Fatalf("newOrder for %s: %v", name, err)
	}
	z, err := c.GetAuthorization(ctx, o.AuthzURLs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range z.Challenges {
		if ch.Type != "dns-01" {
			continue
		}
		rec, err := c.DNS01ChallengeRecord(ch.Token)
		if err != nil {
			t.Fatal(err)
		}
		add(fmt.Sprintf("_acme-challenge.%s. TXT %q", name, rec))
		if _, err := c.Accept(ctx, ch); err != nil {
			t.Fatalf("accepting dns-01 for %s: %v", name, err)
		}
		_, _ = c.WaitAuthorization(ctx, z.URI) // valid or invalid: the challenge says which
		got, err := c.GetChallenge(ctx, ch.URI)
		if err != nil {
			t.Fatal(err)
		}
		return o, got
	}
	t.Fatalf("the authorization for %s offers no dns-01 challenge", name)
	return nil, nil
}
