package signer

import (
	"bytes"
	"crypto/rand"
	"crypto/x509"
	"math/big"
	"testing"
	"time"
)

// TestSignCRLSignsWhatWasLinted holds lintCRL and signLinted to their
// promise: the tbsCertList the issuer's key signs is byte for byte the one
// x509.CreateRevocationList builds with the issuer's own certificate and
// key, so signing the linted encoding changes nothing but the work done.
func TestSignCRLSignsWhatWasLinted(t *testing.T) {
	t.Parallel()
	now := time.Now().Truncate(time.Second).UTC()
	entries := []RevokedEntry{
		{Serial: big.NewInt(0x2001), RevokedAt: now.Add(-time.Hour), Reason: 0},
		{Serial: big.NewInt(0x2002), RevokedAt: now.Add(-time.Minute), Reason: 1},
	}
	for _, kind := range []string{"p256", "p384", "rsa2048"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			iss, _, _ := testCA(t, kind, 5*365*24*time.Hour)
			der, err := iss.SignCRL(7, now, now.Add(24*time.Hour), entries, testCRLURL)
			if err != nil {
				t.Fatal(err)
			}
			got, err := x509.ParseRevocationList(der)
			if err != nil {
				t.Fatal(err)
			}
			idp, err := idpExtension(testCRLURL, false)
			if err != nil {
				t.Fatal(err)
			}
			list := make([]x509.RevocationListEntry, len(entries))
			for n, e := range entries {
				list[n] = x509.RevocationListEntry{SerialNumber: e.Serial, RevocationTime: e.RevokedAt, ReasonCode: e.Reason}
			}
			direct, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{
				SignatureAlgorithm: got.SignatureAlgorithm, Number: big.NewInt(7), ThisUpdate: now, NextUpdate: now.Add(24 * time.Hour),
				RevokedCertificateEntries: list, ExtraExtensions: append(got.ExtraExtensions, idp),
			}, iss.Cert, iss.Signer)
			if err != nil {
				t.Fatal(err)
			}
			want, err := x509.ParseRevocationList(direct)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.RawTBSRevocationList, want.RawTBSRevocationList) {
				t.Fatalf("the signed tbsCertList differs from the one the issuer's key would build directly:\n got %x\nwant %x",
					got.RawTBSRevocationList, want.RawTBSRevocationList)
			}
		})
	}
}
