package pkcs11_test

import (
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ThalesGroup/crypto11"

	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/signer/pkcs11"
)

// TestLabelNamingTwoKeyPairs: a key_label may name an old key kept beside
// its replacement. The worker takes the one whose public key is the issuer
// certificate's, whichever the token lists first, and Ready keeps saying
// so; with no certificate to choose by, Open refuses rather than guess.
// Before, crypto11's FindKeyPair took the first listed: a worker refused to
// mount a profile whose key was on the token, or Ready dropped it.
func TestLabelNamingTwoKeyPairs(t *testing.T) {
	tokenMu.RLock()
	defer tokenMu.RUnlock()
	needHSM(t)
	label := fmt.Sprintf("dup-%d", labels.Add(1))
	dir := t.TempDir()
	if _, err := signer.InitLocal(dir, signer.CAOptions{Name: "Dup Test", URLBase: "http://ca.test"}); err != nil {
		t.Fatal(err)
	}
	ctx, err := crypto11.Configure(&crypto11.Config{Path: hsm.module, TokenLabel: tokenLabel, Pin: userPIN, MaxSessions: 2})
	if err != nil {
		t.Fatal(err)
	}
	var pairs []crypto11.Signer
	for _, id := range []string{"-old", "-new", "-newer"} {
		k, err := ctx.GenerateECDSAKeyPairWithLabel([]byte(label+id), []byte(label), elliptic.P256())
		if err != nil {
			t.Fatal(err)
		}
		pairs = append(pairs, k)
	}
	ctx.Close()
	roots, err := signer.ReadCertificates(filepath.Join(dir, signer.RootCertFile))
	if err != nil {
		t.Fatal(err)
	}
	rootKey, err := signer.ReadKey(filepath.Join(dir, signer.RootKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	cfg := pkcs11.Config{Module: hsm.module, TokenLabel: tokenLabel, PIN: userPIN, KeyLabel: label, MaxSessions: 4}
	// Whichever of the three the certificate is for, that one is used.
	for i, pair := range pairs {
		skid, err := signer.SubjectKeyID(pair.Public())
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
			SerialNumber: big.NewInt(int64(0x1234567890 + i)), Subject: pkix.Name{CommonName: "Dup HSM Intermediate"},
			NotBefore: now.Add(-time.Minute), NotAfter: now.Add(365 * 24 * time.Hour),
			BasicConstraintsValid: true, IsCA: true, MaxPathLenZero: true, SubjectKeyId: skid,
			KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		}, roots[0], pair.Public(), rootKey)
		if err != nil {
			t.Fatal(err)
		}
		certFile := filepath.Join(dir, fmt.Sprintf("hsm-%d.pem", i))
		if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
			t.Fatal(err)
		}
		iss, tok, err := pkcs11.LoadIssuer(cfg, certFile)
		if err != nil {
			t.Errorf("key pair %d of 3 under %q: LoadIssuer: %v", i, label, err)
			continue
		}
		if err := tok.Ready(t.Context()); err != nil {
			t.Errorf("key pair %d of 3 under %q: Ready: %v", i, label, err)
		}
		if _, err := iss.Signer.Sign(rand.Reader, make([]byte, 32), nil); err != nil {
			t.Errorf("key pair %d: signing: %v", i, err)
		}
		tok.Close()
	}
	if _, err := pkcs11.Open(cfg, nil); err == nil || !strings.Contains(err.Error(), "3 key pairs match") {
		t.Errorf("Open with no certificate to choose by, the label naming three key pairs: %v, want a refusal saying so", err)
	}
}
