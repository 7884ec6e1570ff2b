package signer

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestChainCheckAcceptsALaterRoot: a cross root made seconds after the
// intermediate it cross-signs (ca init --cross-root on a slow machine)
// still passes the chain check: it is about signatures, not dates.
func TestChainCheckAcceptsALaterRoot(t *testing.T) {
	t0 := time.Now().Truncate(time.Second)
	cert := func(cn string, nb time.Time, key, parentKey *ecdsa.PrivateKey, parent *x509.Certificate) *x509.Certificate {
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(nb.UnixNano()), Subject: pkix.Name{CommonName: cn},
			NotBefore: nb, NotAfter: t0.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
		if parent == nil {
			parent = tmpl
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	rootKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	interKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	root := cert("Later Root", t0.Add(3*time.Second), rootKey, rootKey, nil)
	inter := cert("Earlier Intermediate", t0, interKey, rootKey, root)
	rootFile := filepath.Join(t.TempDir(), "root.pem")
	if err := os.WriteFile(rootFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: root.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := verifiesTo([]*x509.Certificate{inter}, rootFile); err != nil {
		t.Fatalf("an intermediate 3 s older than its root: %v", err)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	stranger := cert("Stranger", t0, other, other, nil)
	if err := verifiesTo([]*x509.Certificate{stranger}, rootFile); err == nil {
		t.Fatal("a certificate the root did not sign passed the chain check")
	}
}
