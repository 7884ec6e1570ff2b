package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base32"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	xacme "golang.org/x/crypto/acme"
)

// persistProfile offers only the two DNS methods that need no per-order
// record write by the CA's own DNS: neither is offered by default.
const persistProfile = `
[profiles.standing]
description = "validated by a standing DNS record"
backend = "local"
validity_hours = 240
key_types = ["p256"]
challenges = ["dns-persist-01", "dns-account-01"]
identifier_types = ["dns", "ip"]
allow_wildcards = true
key_usages = ["digitalSignature"]
ext_key_usages = ["serverAuth"]
`

// accountWithURL registers an account and returns its client and URL.
func accountWithURL(t *testing.T, ca *CA) (*xacme.Client, string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	c := &xacme.Client{Key: key, DirectoryURL: ca.BaseURL + "/directory", HTTPClient: ca.HTTPClient()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := c.Register(ctx, &xacme.Account{}, xacme.AcceptTOS)
	if err != nil {
		t.Fatalf("registering an account: %v", err)
	}
	return c, a.URI
}

// accountLabel is dns-account-01's label, computed here as a client does.
func accountLabel(accountURL string) string {
	sum := sha256.Sum256([]byte(accountURL))
	return "_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:10]))
}

// directoryHashPrefix is the directory's meta.accountHashPrefix.
func directoryHashPrefix(t *testing.T, ca *CA) string {
	t.Helper()
	resp, err := ca.HTTPClient().Get(ca.BaseURL + "/directory")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var dir struct {
		Meta struct{ AccountHashPrefix string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&dir); err != nil || dir.Meta.AccountHashPrefix == "" {
		t.Fatalf("directory has no meta.accountHashPrefix (%v)", err)
	}
	return dir.Meta.AccountHashPrefix
}

// hashedAccountURI is draft-ietf-acme-dns-persist-02's hashed accounturi,
// computed here as a client does.
func hashedAccountURI(prefix, domain, thumbprint, accountURL string) string {
	in := append([]byte{byte(len(domain))}, domain+thumbprint+accountURL...)
	sum := sha256.Sum256(in)
	return prefix + "sha-256/" + base64.RawURLEncoding.EncodeToString(sum[:])
}

// obtainBy orders names under the standing profile and answers each
// pending authorization's challenge of type method (its DNS record set by
// prepare, given the authorization's base name and the challenge), then
// finalizes. The error of a failed authorization carries its problem.
func obtainBy(ctx context.Context, c *xacme.Client, method string, names []string, prepare func(base string, ch *xacme.Challenge)) ([][]byte, error) {
	var ids []xacme.AuthzID
	tmpl := &x509.CertificateRequest{}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			ids = append(ids, xacme.IPIDs(n)...)
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			ids = append(ids, xacme.DomainIDs(n)...)
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	o, err := c.AuthorizeOrder(ctx, ids, xacme.WithOrderIssuanceProfile("standing"))
	if err != nil {
		return nil, fmt.Errorf("newOrder: %w", err)
	}
	for _, u := range o.AuthzURLs {
		z, err := c.GetAuthorization(ctx, u)
		if err != nil {
			return nil, err
		}
		if z.Status == xacme.StatusValid {
			continue
		}
		var ch *xacme.Challenge
		for _, x := range z.Challenges {
			if x.Type == method {
				ch = x
			}
		}
		if ch == nil {
			return nil, fmt.Errorf("authorization for %s offers no %s", z.Identifier.Value, method)
		}
		prepare(z.Identifier.Value, ch)
		if _, err := c.Accept(ctx, ch); err != nil {
			return nil, fmt.Errorf("accepting %s: %w", method, err)
		}
		if _, err := c.WaitAuthorization(ctx, u); err != nil {
			return nil, fmt.Errorf("authorization for %s: %w", z.Identifier.Value, err)
		}
	}
	if _, err := c.WaitOrder(ctx, o.URI); err != nil {
		return nil, fmt.Errorf("waiting for ready: %w", err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	csr, _ := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	chain, _, err := c.CreateOrderCert(ctx, o.FinalizeURL, csr, true)
	if err != nil {
		return nil, fmt.Errorf("finalize: %w", err)
	}
	return chain, nil
}

// TestDNSPersistAndAccount drives dns-persist-01 and dns-account-01
// through the real binaries on both stores, with x/crypto/acme posting to
// the challenge URLs: one standing record with policy=wildcard gives a
// certificate for a name and its wildcard; without the policy the wildcard
// is refused, as are another account's record, a record past its
// persistUntil and one that CAA's validationmethods excludes; dns-account-01
// gives a wildcard at the account's own label.
func TestDNSPersistAndAccount(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.Name, func(t *testing.T) {
			ca := startCA(t, d.URL(t), persistProfile)
			root, _ := os.ReadFile(ca.Root)
			alice, aliceURL := accountWithURL(t, ca)
			bob, _ := accountWithURL(t, ca)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			record := func(owner, value string) { ca.DNS.SetTXT("_validation-persist."+owner, value) }
			published := func(string, *xacme.Challenge) {} // the record stands already
			standing := "hallmark.test; accounturi=" + aliceURL

			t.Run("name and wildcard by one record", func(t *testing.T) {
				record("wild.persist.test", standing+"; policy=wildcard")
				chain, err := obtainBy(ctx, alice, "dns-persist-01", []string{"wild.persist.test", "*.wild.persist.test"}, published)
				if err != nil {
					t.Fatal(err)
				}
				leaf := verifyTo(t, chain, root, "wild.persist.test")
				verifyTo(t, chain, root, "any.wild.persist.test")
				if len(leaf.DNSNames) != 2 {
					t.Fatalf("certificate names %v, want the name and its wildcard", leaf.DNSNames)
				}
			})
			t.Run("IP address by its reverse zone", func(t *testing.T) {
				ca.DNS.SetTXT("_ip-validation-persist.7.2.0.192.in-addr.arpa", standing)
				chain, err := obtainBy(ctx, alice, "dns-persist-01", []string{"192.0.2.7"}, published)
				if err != nil {
					t.Fatal(err)
				}
				leaf, _ := x509.ParseCertificate(chain[0])
				if len(leaf.IPAddresses) != 1 || leaf.IPAddresses[0].String() != "192.0.2.7" {
					t.Fatalf("certificate for %v, want 192.0.2.7", leaf.IPAddresses)
				}
				if _, err := obtainBy(ctx, bob, "dns-persist-01", []string{"192.0.2.7"}, published); err == nil {
					t.Fatal("another account was validated by alice's record")
				}
			})
			t.Run("persistUntil ahead bounds the authorization", func(t *testing.T) {
				until := time.Now().Add(time.Hour).Truncate(time.Second)
				record("bounded.persist.test", fmt.Sprintf("%s; persistUntil=%d", standing, until.Unix()))
				o, err := alice.AuthorizeOrder(ctx, xacme.DomainIDs("bounded.persist.test"), xacme.WithOrderIssuanceProfile("standing"))
				if err != nil {
					t.Fatal(err)
				}
				z, err := alice.GetAuthorization(ctx, o.AuthzURLs[0])
				if err != nil {
					t.Fatal(err)
				}
				for _, ch := range z.Challenges {
					if ch.Type == "dns-persist-01" {
						if _, err := alice.Accept(ctx, ch); err != nil {
							t.Fatal(err)
						}
					}
				}
				z, err = alice.WaitAuthorization(ctx, o.AuthzURLs[0])
				if err != nil || z.Status != xacme.StatusValid || !z.Expires.Equal(until) {
					t.Fatalf("authorization %+v, %v: want valid, expiring at persistUntil %s", z, err, until)
				}
			})
			refused := []struct {
				name, owner, value, caa string
				client                  *xacme.Client
				names                   []string
				want                    string
			}{
				{"wildcard without policy=wildcard", "tame.persist.test", standing, "", alice,
					[]string{"*.tame.persist.test"}, "no policy=wildcard"},
				{"another account's accounturi", "bobs.persist.test", standing, "", bob,
					[]string{"bobs.persist.test"}, "another account"},
				{"after persistUntil", "lapsed.persist.test", fmt.Sprintf("%s; persistUntil=%d", standing, time.Now().Add(-time.Minute).Unix()), "", alice,
					[]string{"lapsed.persist.test"}, "persistUntil"},
				{"CAA validationmethods excludes it", "caa.persist.test", standing, "hallmark.test; validationmethods=dns-01", alice,
					[]string{"caa.persist.test"}, "validationmethods"},
			}
			for _, tc := range refused {
				t.Run(tc.name, func(t *testing.T) {
					record(tc.owner, tc.value)
					if tc.caa != "" {
						ca.DNS.SetCAA(tc.owner, 0, "issue", tc.caa)
					}
					_, err := obtainBy(ctx, tc.client, "dns-persist-01", tc.names, published)
					var ae *xacme.AuthorizationError
					if !errors.As(err, &ae) || !strings.Contains(err.Error(), tc.want) {
						t.Fatalf("got %v, want a failed authorization saying %q", err, tc.want)
					}
				})
			}
			t.Run("hashed accounturi of draft -02, from the directory's prefix", func(t *testing.T) {
				prefix := directoryHashPrefix(t, ca)
				thumb, err := xacme.JWKThumbprint(alice.Key.Public())
				if err != nil {
					t.Fatal(err)
				}
				record("hashed.persist.test", "hallmark.test; accounturi="+hashedAccountURI(prefix, "hashed.persist.test", thumb, aliceURL))
				chain, err := obtainBy(ctx, alice, "dns-persist-01", []string{"hashed.persist.test"}, published)
				if err != nil {
					t.Fatal(err)
				}
				verifyTo(t, chain, root, "hashed.persist.test")
				if _, err := obtainBy(ctx, bob, "dns-persist-01", []string{"hashed.persist.test"}, published); err == nil {
					t.Fatal("another account was validated by alice's hashed accounturi")
				}
				// A record hashed with the key alice then rolls over still
				// names her (the worker keeps replaced keys, migration 0022).
				record("rolled.persist.test", "hallmark.test; accounturi="+hashedAccountURI(prefix, "rolled.persist.test", thumb, aliceURL))
				newKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
				if err := alice.AccountKeyRollover(ctx, newKey); err != nil {
					t.Fatalf("key rollover: %v", err)
				}
				if _, err := obtainBy(ctx, alice, "dns-persist-01", []string{"rolled.persist.test"}, published); err != nil {
					t.Fatalf("after a key rollover, the record hashed with the replaced key: %v", err)
				}
			})
			t.Run("lego v5's client: a name and its wildcard", func(t *testing.T) {
				chain := obtainWithLegoV5(t, ca, func(accountURL string) {
					record("v5.persist.test", "hallmark.test; accounturi="+accountURL+"; policy=wildcard")
				}, "v5.persist.test", "*.v5.persist.test")
				verifyTo(t, chain, root, "v5.persist.test")
				verifyTo(t, chain, root, "any.v5.persist.test")
			})
			t.Run("dns-account-01 wildcard at the account's label", func(t *testing.T) {
				chain, err := obtainBy(ctx, alice, "dns-account-01", []string{"*.acct.persist.test"}, func(base string, ch *xacme.Challenge) {
					rec, err := alice.DNS01ChallengeRecord(ch.Token)
					if err != nil {
						t.Fatal(err)
					}
					ca.DNS.SetTXT(accountLabel(aliceURL)+"._acme-challenge."+base, rec)
				})
				if err != nil {
					t.Fatal(err)
				}
				verifyTo(t, chain, root, "x.acct.persist.test")
			})
		})
	}
}
