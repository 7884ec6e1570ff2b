package csr

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/goodkey/goodkeytest"
)

var testKeys = sync.OnceValue(func() map[string]crypto.Signer {
	m := map[string]crypto.Signer{}
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	p521, _ := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	r2048, _ := rsa.GenerateKey(rand.Reader, 2048)
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	m["p256"], m["p384"], m["p521"], m["rsa2048"], m["ed25519"], m["rsa1024"] = p256, p384, p521, r2048, ed, weakRSA()
	m["rsa2048close"], _ = goodkeytest.NeighbourPrimes(2048)
	return m
})

// weakRSA returns a 1024-bit RSA key; rsa.GenerateKey refuses to make one.
func weakRSA() *rsa.PrivateKey {
	for {
		p, _ := rand.Prime(rand.Reader, 512)
		q, _ := rand.Prime(rand.Reader, 512)
		if k := goodkeytest.FromPrimes(p, q); k != nil && k.N.BitLen() == 1024 {
			return k
		}
	}
}

func mkCSR(t testing.TB, key crypto.Signer, tmpl x509.CertificateRequest) []byte {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, &tmpl, key)
	if err != nil {
		t.Fatalf("creating CSR: %v", err)
	}
	return der
}

func dns(v ...string) []acme.Identifier {
	out := make([]acme.Identifier, len(v))
	for i, s := range v {
		out[i] = acme.Identifier{Type: acme.IdentifierDNS, Value: s}
	}
	return out
}

func ipID(v string) acme.Identifier { return acme.Identifier{Type: acme.IdentifierIP, Value: v} }

func ext(t testing.TB, oid asn1.ObjectIdentifier, v any) pkix.Extension {
	t.Helper()
	b, err := asn1.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return pkix.Extension{Id: oid, Value: b}
}

// rawSAN builds a subjectAltName with one GeneralName of the given tag.
func rawSAN(t testing.TB, tag int, value []byte, compound bool) pkix.Extension {
	t.Helper()
	gn := asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: tag, IsCompound: compound, Bytes: value}
	dnsName := asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 2, Bytes: []byte("a.example")}
	b, err := asn1.Marshal([]asn1.RawValue{dnsName, gn})
	if err != nil {
		t.Fatal(err)
	}
	return pkix.Extension{Id: oidSubjectAltName, Value: b}
}

var defaultTypes = []string{"rsa2048", "rsa3072", "rsa4096", "p256", "p384"}

func TestCheck(t *testing.T) {
	t.Parallel()
	ks := testKeys()
	p256 := ks["p256"]
	otherName := func() []byte {
		// otherName ::= SEQUENCE { type-id OID, value [0] EXPLICIT ANY }
		oid, _ := asn1.Marshal(asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 311, 20, 2, 3})
		val, _ := asn1.Marshal(asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 0, IsCompound: true, Bytes: mustMarshal(t, "admin@corp")})
		return append(oid, val...)
	}
	tests := []struct {
		name     string
		der      func() []byte
		want     []acme.Identifier
		keyTypes []string
		problem  acme.ProblemType // "" means accepted
		detail   string
	}{
		{"DNS names", func() []byte {
			return mkCSR(t, p256, x509.CertificateRequest{DNSNames: []string{"a.example", "b.example"}})
		}, dns("b.example", "a.example"), defaultTypes, "", ""},
		{"DNS case-insensitive", func() []byte {
			return mkCSR(t, p256, x509.CertificateRequest{DNSNames: []string{"A.Example"}})
		}, dns("a.example"), defaultTypes, "", ""},
		{"IP addresses", func() []byte {
			return mkCSR(t, p256, x509.CertificateRequest{IPAddresses: []net.IP{net.ParseIP("192.0.2.1"), net.ParseIP("2001:db8::1")}})
		}, []acme.Identifier{ipID("192.0.2.1"), ipID("2001:db8::1")}, defaultTypes, "", ""},
		{"IPv4 as 16 bytes", func() []byte {
			return mkCSR(t, p256, x509.CertificateRequest{IPAddresses: []net.IP{net.ParseIP("192.0.2.1").To16()}})
		}, []acme.Identifier{ipID("192.0.2.1")}, defaultTypes, "", ""},
		{"wildcard", func() []byte {
			return mkCSR(t, p256, x509.CertificateRequest{DNSNames: []string{"*.example.com", "example.com"}})
		}, dns("*.example.com", "example.com"), defaultTypes, "", ""},
		{"CN among SANs", func() []byte {
			return mkCSR(t, p256, x509.CertificateRequest{Subject: pkix.Name{CommonName: "A.example"}, DNSNames: []string{"a.example"}})
		}, dns("a.example"), defaultTypes, "", ""},
		// RFC 8555 §7.4: a dns identifier in the common name alone, or in
		// the common name for one name and the subjectAltNames for the rest.
		{"CN only", func() []byte {
			return mkCSR(t, p256, x509.CertificateRequest{Subject: pkix.Name{CommonName: "a.example"}})
		}, dns("a.example"), defaultTypes, "", ""},
		{"CN plus the other names as SANs", func() []byte {
			return mkCSR(t, p256, x509.CertificateRequest{Subject: pkix.Name{CommonName: "a.example"}, DNSNames: []string{"b.example"}})
		}, dns("a.example", "b.example"), defaultTypes, "", ""},
		{"CN IP among SANs", func() []byte {
			return mkCSR(t, p256, x509.CertificateRequest{Subject: pkix.Name{CommonName: "10.0.0.1"}, IPAddresses: []net.IP{net.ParseIP("10.0.0.1")}})
		}, []acme.Identifier{ipID("10.0.0.1")}, defaultTypes, "", ""},
		{"harmless extensions", func() []byte {
			return mkCSR(t, p256, x509.CertificateRequest{DNSNames: []string{"a.example"}, ExtraExtensions: []pkix.Extension{
				ext(t, oidBasicConstraints, struct{}{}),
				ext(t, oidTLSFeature, []int{5}),
				ext(t, oidExtKeyUsage, []asn1.ObjectIdentifier{{1, 3, 6, 1, 5, 5, 7, 3, 1}}),
				ext(t, oidKeyUsage, asn1.BitString{Bytes: []byte{0x80}, BitLength: 1}),
			}})
		}, dns("a.example"), defaultTypes, "", ""},
		{"ed25519 when listed", func() []byte {
			return mkCSR(t, ks["ed25519"], x509.CertificateRequest{DNSNames: []string{"a.example"}})
		}, dns("a.example"), []string{"ed25519"}, "", ""},
		{"rsa2048", func() []byte {
			return mkCSR(t, ks["rsa2048"], x509.CertificateRequest{DNSNames: []string{"a.example"}})
		}, dns("a.example"), defaultTypes, "", ""},

		{"RSA key with neighbouring primes", func() []byte {
			return mkCSR(t, ks["rsa2048close"], x509.CertificateRequest{DNSNames: []string{"a.example"}})
		}, dns("a.example"), defaultTypes, acme.ProblemBadCSR, "unsafe to certify: the RSA modulus's two prime factors are so close together"},

		{"missing name", func() []byte {
			return mkCSR(t, p256, x509.CertificateRequest{DNSNames: []string{"a.example"}})
		}, dns("a.example", "b.example"), defaultTypes, acme.ProblemBadCSR, "missing dns:b.example"},
		{"extra name", func() []byte {
			return mkCSR(t, p256, x509.CertificateRequest{DNSNames: []string{"a.example", "evil.example"}})
		}, dns("a.example"), defaultTypes, acme.ProblemBadCSR, "not in the order dns:evil.example"},
		{"extra IP", func() []byte {
			return mkCSR(t, p256, x509.CertificateRequest{DNSNames: []string{"a.example"}, IPAddresses: []net.IP{net.ParseIP("10.0.0.1")}})
		}, dns("a.example"), defaultTypes, acme.ProblemBadCSR, "ip:10.0.0.1"},
		{"CN not in SANs", func() []byte {
			return mkCSR(t, p256, x509.CertificateRequest{Subject: pkix.Name{CommonName: "evil.example"}, DNSNames: []string{"a.example"}})
		}, dns("a.example"), defaultTypes, acme.ProblemBadCSR, "not in the order dns:evil.example"},
		{"CN only, not the order's name", func() []byte {
			return mkCSR(t, p256, x509.CertificateRequest{Subject: pkix.Name{CommonName: "evil.example"}})
		}, dns("a.example"), defaultTypes, acme.ProblemBadCSR, "missing dns:a.example; not in the order dns:evil.example"},
		{"CN IP not in SANs", func() []byte {
			return mkCSR(t, p256, x509.CertificateRequest{Subject: pkix.Name{CommonName: "10.0.0.1"}})
		}, []acme.Identifier{ipID("10.0.0.1")}, defaultTypes, acme.ProblemBadCSR, "IP address not among its subjectAltNames"},
		{"two CNs", func() []byte {
			return mkCSR(t, p256, x509.CertificateRequest{Subject: pkix.Name{ExtraNames: []pkix.AttributeTypeAndValue{
				{Type: oidCommonName, Value: "a.example"}, {Type: oidCommonName, Value: "evil.example"},
			}}, DNSNames: []string{"a.example"}})
		}, dns("a.example"), defaultTypes, acme.ProblemBadCSR, "common names"},
		{"email SAN", func() []byte {
			return mkCSR(t, p256, x509.CertificateRequest{DNSNames: []string{"a.example"}, EmailAddresses: []string{"a@a.example"}})
		}, dns("a.example"), defaultTypes, acme.ProblemBadCSR, "email"},
		{"URI SAN", func() []byte {
			u, _ := url.Parse("spiffe://a.example/x")
			return mkCSR(t, p256, x509.CertificateRequest{DNSNames: []string{"a.example"}, URIs: []*url.URL{u}})
		}, dns("a.example"), defaultTypes, acme.ProblemBadCSR, "URI"},
		{"otherName SAN Go ignores", func() []byte {
			return mkCSR(t, p256, x509.CertificateRequest{ExtraExtensions: []pkix.Extension{rawSAN(t, 0, otherName(), true)}})
		}, dns("a.example"), defaultTypes, acme.ProblemBadCSR, "other than DNS name or IP address"},
		{"directoryName SAN", func() []byte {
			dn, _ := asn1.Marshal(pkix.Name{CommonName: "x"}.ToRDNSequence())
			return mkCSR(t, p256, x509.CertificateRequest{ExtraExtensions: []pkix.Extension{rawSAN(t, 4, dn, true)}})
		}, dns("a.example"), defaultTypes, acme.ProblemBadCSR, "other than DNS name or IP address"},
		{"CA basicConstraints", func() []byte {
			return mkCSR(t, p256, x509.CertificateRequest{DNSNames: []string{"a.example"}, ExtraExtensions: []pkix.Extension{
				ext(t, oidBasicConstraints, struct{ IsCA bool }{true}),
			}})
		}, dns("a.example"), defaultTypes, acme.ProblemBadCSR, "CA certificate"},
		{"unknown extension", func() []byte {
			return mkCSR(t, p256, x509.CertificateRequest{DNSNames: []string{"a.example"}, ExtraExtensions: []pkix.Extension{
				ext(t, asn1.ObjectIdentifier{2, 5, 29, 30}, []int{1}), // nameConstraints
			}})
		}, dns("a.example"), defaultTypes, acme.ProblemBadCSR, "2.5.29.30"},
		{"bad signature", func() []byte {
			der := mkCSR(t, p256, x509.CertificateRequest{DNSNames: []string{"a.example"}})
			// The SAN is inside the signed part; change one letter of it.
			i := strings.Index(string(der), "a.example")
			der[i] = 'b'
			return der
		}, dns("a.example"), defaultTypes, acme.ProblemBadCSR, "signature"},
		{"not DER", func() []byte { return []byte("-----BEGIN CERTIFICATE REQUEST-----") }, dns("a.example"), defaultTypes, acme.ProblemBadCSR, "parsed"},
		{"RSA 1024 even if listed", func() []byte {
			return mkCSR(t, ks["rsa1024"], x509.CertificateRequest{DNSNames: []string{"a.example"}})
		}, dns("a.example"), []string{"rsa1024", "rsa2048"}, acme.ProblemBadCSR, "at least 2048"},
		{"p384 when only p256", func() []byte {
			return mkCSR(t, ks["p384"], x509.CertificateRequest{DNSNames: []string{"a.example"}})
		}, dns("a.example"), []string{"p256"}, acme.ProblemBadCSR, "p384"},
		{"ed25519 when not listed", func() []byte {
			return mkCSR(t, ks["ed25519"], x509.CertificateRequest{DNSNames: []string{"a.example"}})
		}, dns("a.example"), defaultTypes, acme.ProblemBadCSR, "ed25519"},
		{"P-521", func() []byte {
			return mkCSR(t, ks["p521"], x509.CertificateRequest{DNSNames: []string{"a.example"}})
		}, dns("a.example"), defaultTypes, acme.ProblemBadCSR, "P-521"},
		{"SHA-1 signature", func() []byte {
			return mkCSR(t, ks["rsa2048"], x509.CertificateRequest{SignatureAlgorithm: x509.SHA1WithRSA, DNSNames: []string{"a.example"}})
		}, dns("a.example"), defaultTypes, acme.ProblemBadCSR, "SHA1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			der := tc.der()
			req, err := Check(der, tc.want, tc.keyTypes)
			if tc.problem == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if req == nil || !equalBytes(req.Raw, der) {
					t.Fatal("the parsed request was not returned")
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			var ae *acme.Error
			if !errors.As(err, &ae) {
				t.Fatalf("%v is not an *acme.Error", err)
			}
			if ae.Problem.Type != tc.problem || !strings.Contains(ae.Problem.Detail, tc.detail) {
				t.Fatalf("got %s %q, want %s containing %q", ae.Problem.Type, ae.Problem.Detail, tc.problem, tc.detail)
			}
		})
	}
}

func mustMarshal(t testing.TB, s string) []byte {
	b, err := asn1.MarshalWithParams(s, "utf8")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func equalBytes(a, b []byte) bool { return string(a) == string(b) }
