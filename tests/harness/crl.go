package harness

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SignedCRL is a CRL's DER, signed by a throwaway issuer, listing serials
// (hex) with thisUpdate this: what a worker would store, for tests of what
// reads it (hallmark crl status, the admin panel). A serial is listed with
// reason 0 (unspecified), or with the reason written after it ("c01:1").
func SignedCRL(t *testing.T, this time.Time, serials ...string) []byte {
	t.Helper()
	ca, key := CRLIssuer(t, this)
	var entries []x509.RevocationListEntry
	for _, s := range serials {
		s, reason, _ := strings.Cut(s, ":")
		n, ok := new(big.Int).SetString(s, 16)
		if !ok {
			t.Fatalf("serial %q is not hex", s)
		}
		e := x509.RevocationListEntry{SerialNumber: n, RevocationTime: this.Add(-time.Second)}
		if reason != "" {
			var err error
			if e.ReasonCode, err = strconv.Atoi(reason); err != nil {
				t.Fatalf("serial %s's reason %q is not a number", s, reason)
			}
		}
		entries = append(entries, e)
	}
	der, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{Number: big.NewInt(1), ThisUpdate: this,
		NextUpdate: this.Add(24 * time.Hour), RevokedCertificateEntries: entries}, ca, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// CRLIssuer is a throwaway self-signed CA that may sign CRLs, valid around
// this, and its key.
func CRLIssuer(t *testing.T, this time.Time) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test issuer"},
		NotBefore: this.Add(-time.Hour), NotAfter: this.Add(48 * time.Hour),
		KeyUsage: x509.KeyUsageCRLSign | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key
}
