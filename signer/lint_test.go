package signer

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"io"
	"testing"
	"time"
)

// TestIssueSignsWhatWasLinted holds lintCertificate and signLinted to their
// promise: the certificate Issue returns is, byte for byte in its
// tbsCertificate, the one x509.CreateCertificate builds for the same template
// with the issuer's own certificate and key, and it verifies.
func TestIssueSignsWhatWasLinted(t *testing.T) {
	// Not parallel: it sets the package's template hook.
	for _, kind := range []string{"p256", "p384", "rsa2048"} {
		t.Run(kind, func(t *testing.T) {
			iss, _, _ := testCA(t, kind, 5*365*24*time.Hour)
			var tmpl *x509.Certificate
			testHookTemplate = func(c *x509.Certificate) { tmpl = c }
			defer func() { testHookTemplate = nil }()
			pub := testKey(t, "p256").Public()
			out, err := iss.Issue(context.Background(), request(defaultProfile(), pub, dns("www.example.com"), ip("10.0.0.5")))
			if err != nil {
				t.Fatal(err)
			}
			got, err := x509.ParseCertificate(out.DER)
			if err != nil {
				t.Fatal(err)
			}
			direct, err := x509.CreateCertificate(rand.Reader, tmpl, iss.Cert, pub, iss.Signer)
			if err != nil {
				t.Fatal(err)
			}
			want, err := x509.ParseCertificate(direct)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.RawTBSCertificate, want.RawTBSCertificate) {
				t.Fatalf("the signed tbsCertificate differs from the one the issuer's key would build directly:\n got %x\nwant %x",
					got.RawTBSCertificate, want.RawTBSCertificate)
			}
			if got.SignatureAlgorithm != want.SignatureAlgorithm {
				t.Errorf("signature algorithm %s, want %s", got.SignatureAlgorithm, want.SignatureAlgorithm)
			}
			if err := got.CheckSignatureFrom(iss.Cert); err != nil {
				t.Errorf("signature: %v", err)
			}
		})
	}
}

// faultySigner returns signatures that do not verify, as a failing HSM might.
type faultySigner struct{ crypto.Signer }

func (f faultySigner) Sign(r io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	sig, err := f.Signer.Sign(r, digest, opts)
	if err == nil {
		sig[len(sig)/2] ^= 0x01
	}
	return sig, err
}

// TestFaultySignatureIsNotReturned keeps the check x509.CreateCertificate
// makes: a signature from the issuer's key that does not verify against the
// issuer certificate yields an error, never a certificate or a CRL.
func TestFaultySignatureIsNotReturned(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"p256", "rsa2048"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			iss, _, _ := testCA(t, kind, 5*365*24*time.Hour)
			iss.Signer = faultySigner{iss.Signer}
			out, err := iss.Issue(context.Background(), request(defaultProfile(), testKey(t, "p256").Public(), dns("www.example.com")))
			if err == nil || out != nil {
				t.Fatalf("Issue returned a certificate (%v) and error %v; want only an error", out != nil, err)
			}
			now := time.Now()
			der, err := iss.SignCRL(1, now, now.Add(time.Hour), nil, testCRLURL)
			if err == nil || der != nil {
				t.Fatalf("SignCRL returned %d bytes, %v; want an error", len(der), err)
			}
		})
	}
}
