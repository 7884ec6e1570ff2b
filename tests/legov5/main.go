// Command legov5 obtains a certificate by dns-persist-01 with lego v5's
// own client library (its CLI's dependencies cannot all be fetched here).
// It registers an account and prints "account <URL>", waits for a line on
// stdin (the test publishes the _validation-persist record meanwhile), then
// orders the names and writes the chain to -out.
package main

import (
	"bufio"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/go-acme/lego/v5/acme"
	"github.com/go-acme/lego/v5/certcrypto"
	"github.com/go-acme/lego/v5/certificate"
	"github.com/go-acme/lego/v5/challenge/dnspersist01"
	"github.com/go-acme/lego/v5/lego"
	"github.com/go-acme/lego/v5/registration"
)

type user struct {
	key  crypto.Signer
	reg  *acme.ExtendedAccount
	mail string
}

func (u *user) GetEmail() string                       { return u.mail }
func (u *user) GetRegistration() *acme.ExtendedAccount { return u.reg }
func (u *user) GetPrivateKey() crypto.Signer           { return u.key }

func main() {
	dir := flag.String("server", "", "ACME directory URL")
	caFile := flag.String("ca-cert", "", "PEM file of the root the server's TLS certificate chains to")
	resolver := flag.String("resolver", "", "DNS server (host:port) holding the _validation-persist records")
	issuer := flag.String("issuer-domain-name", "", "the issuer-domain-name the record names")
	profile := flag.String("profile", "", "ACME profile to order")
	domains := flag.String("domains", "", "comma-separated names")
	out := flag.String("out", "", "file for the certificate chain (PEM)")
	flag.Parse()
	if err := run(*dir, *caFile, *resolver, *issuer, *profile, strings.Split(*domains, ","), *out); err != nil {
		fmt.Fprintln(os.Stderr, "legov5:", err)
		os.Exit(1)
	}
}

func run(dir, caFile, resolver, issuer, profile string, domains []string, out string) error {
	pemRoot, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pemRoot) {
		return fmt.Errorf("no certificate in %s", caFile)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	u := &user{key: key, mail: "legov5@hallmark.test"}
	cfg := lego.NewConfig(u)
	cfg.CADirURL = dir
	cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	client, err := lego.NewClient(cfg)
	if err != nil {
		return fmt.Errorf("the client: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if u.reg, err = client.Registration.Register(ctx, registration.RegisterOptions{TermsOfServiceAgreed: true}); err != nil {
		return fmt.Errorf("registering: %w", err)
	}
	fmt.Println("account", u.reg.Location)
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for the record to be published: %w", err)
	}
	opts := dnspersist01.NewOptions()
	opts.RecursiveNameservers = []string{resolver}
	dnspersist01.SetDefaultClient(dnspersist01.NewClient(opts))
	base := strings.TrimPrefix(domains[0], "*.")
	seen, err := dnspersist01.DefaultClient().LookupTXT(ctx, "_validation-persist."+base)
	fmt.Printf("record seen at _validation-persist.%s: %v (%v)\n", base, seen, err)
	if err := client.Challenge.SetDNSPersist01(
		dnspersist01.WithIssuerDomainName(issuer),
		dnspersist01.DisableAuthoritativeNssPropagationRequirement(),
	); err != nil {
		return err
	}
	res, err := client.Certificate.Obtain(ctx, certificate.ObtainRequest{Domains: domains, Bundle: true, Profile: profile, KeyType: certcrypto.EC256})
	if err != nil {
		return fmt.Errorf("obtaining: %w", err)
	}
	return os.WriteFile(out, res.Certificate, 0o600)
}
