package signer

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// quietLog keeps the audit lines out of test output.
var quietLog = slog.New(slog.DiscardHandler)

// countingSigner wraps a real key and counts its signatures: it is how the
// tests see whether the issuer's key was used at all.
type countingSigner struct {
	crypto.Signer
	calls atomic.Int64
}

func (c *countingSigner) Sign(r io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	c.calls.Add(1)
	return c.Signer.Sign(r, digest, opts)
}

// keys are generated once per type per test binary: RSA generation is slow.
var (
	keysMu sync.Mutex
	keys   = map[string]crypto.Signer{}
)

func testKey(t testing.TB, kind string) crypto.Signer {
	t.Helper()
	keysMu.Lock()
	defer keysMu.Unlock()
	if k, ok := keys[kind]; ok {
		return k
	}
	k := newKey(t, kind)
	keys[kind] = k
	return k
}

func newKey(t testing.TB, kind string) crypto.Signer {
	t.Helper()
	var k crypto.Signer
	var err error
	switch kind {
	case "p256":
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "p384":
		k, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "p521":
		k, err = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case "rsa1024":
		k, err = rsa.GenerateKey(rand.Reader, 1024)
	case "rsa2048":
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	default:
		t.Fatalf("unknown key kind %q", kind)
	}
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// testCA is a root (P-384) and an intermediate whose key is issuerKey, wrapped
// in a countingSigner. It returns the issuer and a pool holding the root.
func testCA(t testing.TB, issuerKind string, interValidity time.Duration) (*Issuer, *countingSigner, *x509.CertPool) {
	t.Helper()
	rootKey := testKey(t, "p384")
	// A fresh intermediate key per CA, so each test's issuer (and its
	// linting issuer) is its own.
	interKey := newKey(t, issuerKind)
	now := time.Now().Truncate(time.Second)
	rootTmpl, err := caTemplate(pkix.Name{CommonName: "Test Root CA", Organization: []string{"Test"}}, rootKey.Public(), now.Add(-time.Hour), now.Add(20*365*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	rootTmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	rootDER, err := x509.CreateCertificate(rand.Reader, rootTmpl, rootTmpl, rootKey.Public(), rootKey)
	if err != nil {
		t.Fatal(err)
	}
	root, _ := x509.ParseCertificate(rootDER)
	interTmpl, err := caTemplate(pkix.Name{CommonName: "Test Intermediate " + issuerKind, Organization: []string{"Test"}}, interKey.Public(), now.Add(-time.Hour), now.Add(interValidity))
	if err != nil {
		t.Fatal(err)
	}
	interTmpl.MaxPathLenZero = true
	interTmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	interTmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	interDER, err := x509.CreateCertificate(rand.Reader, interTmpl, root, interKey.Public(), rootKey)
	if err != nil {
		t.Fatal(err)
	}
	inter, _ := x509.ParseCertificate(interDER)
	cs := &countingSigner{Signer: interKey}
	iss, err := NewIssuer(inter, nil, cs)
	if err != nil {
		t.Fatal(err)
	}
	iss.Logger = quietLog
	pool := x509.NewCertPool()
	pool.AddCert(root)
	return iss, cs, pool
}
