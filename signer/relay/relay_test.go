package relay_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	xacme "golang.org/x/crypto/acme"

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

// faultAfterFinalize carries the relay's requests to Pebble, counts the
// orders it places, and fails the first certificate download: the attempt
// dies after the upstream has issued, as on a timeout or a worker's lost
// connection.
type faultAfterFinalize struct {
	base     http.RoundTripper
	newOrder string // the directory's newOrder URL

	mu        sync.Mutex
	orders    int
	certFails int
}

// counts are the orders placed and the downloads failed so far.
func (f *faultAfterFinalize) counts() (orders, certFails int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.orders, f.certFails
}

func (f *faultAfterFinalize) RoundTrip(req *http.Request) (*http.Response, error) {
	f.mu.Lock()
	if req.Method == http.MethodPost && req.URL.String() == f.newOrder {
		f.orders++
	}
	// Pebble serves certificates under /certZ/.
	fail := strings.HasPrefix(req.URL.Path, "/certZ/") && f.certFails == 0
	if fail {
		f.certFails++
	}
	f.mu.Unlock()
	if fail {
		return nil, errors.New("connection reset by peer (injected)")
	}
	return f.base.RoundTrip(req)
}

// TestRelayRetryResumesTheUpstreamOrder: an attempt that fails after the
// upstream issued is retried (signer.ErrUnavailable), and the retry fetches
// the certificate of the order already placed instead of placing a second
// one: one upstream order, one upstream certificate.
func TestRelayRetryResumesTheUpstreamOrder(t *testing.T) {
	p := pebble.Start(t)
	dir, err := (&xacme.Client{DirectoryURL: p.DirectoryURL, HTTPClient: &http.Client{Transport: p.Transport}}).Discover(context.Background())
	if err != nil || dir.OrderURL == "" {
		t.Fatalf("Pebble's directory: %v (newOrder %q)", err, dir.OrderURL)
	}
	fault := &faultAfterFinalize{base: p.Transport, newOrder: dir.OrderURL}
	b, err := relay.New(relay.Config{Name: "resume", DirectoryURL: p.DirectoryURL, Transport: fault,
		AccountKey: filepath.Join(t.TempDir(), "account.key"), Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r, csr := order(t, "resume.example.test")
	if _, err := b.Issue(context.Background(), r, csr); !errors.Is(err, signer.ErrUnavailable) {
		t.Fatalf("the attempt whose download failed: %v, want signer.ErrUnavailable (retried)", err)
	}
	if orders, certFails := fault.counts(); certFails != 1 || orders != 1 {
		t.Fatalf("%d upstream orders, %d certificate downloads failed, want 1 and 1: the fault was not where the test puts it", orders, certFails)
	}
	issued, err := b.Issue(context.Background(), r, csr)
	if err != nil {
		t.Fatalf("the retry: %v", err)
	}
	leaf, err := x509.ParseCertificate(issued.DER)
	if err != nil || len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "resume.example.test" {
		t.Fatalf("the retry's certificate: %v, %v", leaf, err)
	}
	if orders, _ := fault.counts(); orders != 1 {
		t.Fatalf("%d upstream orders placed for one order, want 1: the retry placed another instead of resuming", orders)
	}
}
