package relay_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/cmd/config"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/signer/relay"
	"github.com/hallmark-ca/hallmark/tests/pebble"
)

func order(t *testing.T, names ...string) (signer.Request, *x509.CertificateRequest) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{DNSNames: names}, key)
	if err != nil {
		t.Fatal(err)
	}
	csr, _ := x509.ParseCertificateRequest(der)
	var ids []acme.Identifier
	for _, n := range names {
		ids = append(ids, acme.Identifier{Type: acme.IdentifierDNS, Value: n})
	}
	return signer.Request{Profile: config.Profile{ValidityHours: 48}, ProfileName: "upstream", Names: ids, PublicKey: key.Public()}, csr
}

// TestRelayIssueRevokeWithPebble: a certificate for the order's names and
// CSR key comes back from a real Pebble, and is revoked there.
func TestRelayIssueRevokeWithPebble(t *testing.T) {
	p := pebble.Start(t)
	b, err := relay.New(relay.Config{Name: "up", DirectoryURL: p.DirectoryURL, CACert: p.CACert,
		AccountKey: filepath.Join(t.TempDir(), "account.key"), Contact: []string{"ops@example.test"}, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Ready(context.Background()); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	r, csr := order(t, "relay.example.test", "www.relay.example.test")
	issued, err := b.Issue(context.Background(), r, csr)
	if err != nil {
		t.Fatalf("Issue: %v", err)
	}
	leaf, _ := x509.ParseCertificate(issued.DER)
	if len(leaf.DNSNames) != 2 {
		t.Fatalf("upstream certificate names %v", leaf.DNSNames)
	}
	if b.IssuerID() != "relay:up" {
		t.Fatalf("IssuerID %q", b.IssuerID())
	}
	if err := b.Revoke(context.Background(), issued.SerialHex, issued.DER, 4); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
}

// TestRelayUpstreamDownIsRetried: an upstream that does not answer is
// signer.ErrUnavailable (the job is retried), never a verdict.
func TestRelayUpstreamDownIsRetried(t *testing.T) {
	t.Parallel()
	b, err := relay.New(relay.Config{Name: "down", DirectoryURL: "https://127.0.0.1:1/dir",
		AccountKey: filepath.Join(t.TempDir(), "account.key"), Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r, csr := order(t, "down.example.test")
	if _, err := b.Issue(context.Background(), r, csr); !errors.Is(err, signer.ErrUnavailable) {
		t.Fatalf("Issue with the upstream down: %v, want signer.ErrUnavailable", err)
	}
	if err := b.Ready(context.Background()); !errors.Is(err, signer.ErrUnavailable) {
		t.Fatalf("Ready with the upstream down: %v", err)
	}
}
