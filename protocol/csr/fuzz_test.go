package csr

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

var fuzzWant = []acme.Identifier{
	{Type: acme.IdentifierDNS, Value: "a.example"},
	{Type: acme.IdentifierDNS, Value: "*.b.example"},
	{Type: acme.IdentifierIP, Value: "192.0.2.1"},
}

// FuzzCheck feeds arbitrary DER to Check. Seeds are in
// testdata/fuzz/FuzzCheck (regenerate with HALLMARK_WRITE_SEEDS=1).
func FuzzCheck(f *testing.F) {
	f.Add([]byte{0x30, 0x00})
	f.Fuzz(func(t *testing.T, der []byte) {
		req, err := Check(der, fuzzWant, []string{"rsa2048", "p256", "p384", "ed25519"})
		if err != nil {
			var ae *acme.Error
			if !errors.As(err, &ae) || ae.Problem.Type != acme.ProblemBadCSR || ae.Problem.Detail == "" {
				t.Fatalf("error %v is not a badCSR *acme.Error with a detail", err)
			}
			return
		}
		if err := req.CheckSignature(); err != nil {
			t.Fatalf("accepted a CSR whose signature does not verify: %v", err)
		}
		if len(req.EmailAddresses)+len(req.URIs) != 0 {
			t.Fatal("accepted a CSR with email or URI names")
		}
		names := map[string]bool{}
		for _, d := range req.DNSNames {
			names[dnsKey(d)] = true
		}
		for _, ip := range req.IPAddresses {
			k, _ := ipKey(ip)
			names[k] = true
		}
		if len(names) != len(fuzzWant) {
			t.Fatalf("accepted names %v for order %v", names, fuzzWant)
		}
		for _, ext := range req.Extensions {
			if !harmless[ext.Id.String()] {
				t.Fatalf("accepted extension %s", ext.Id)
			}
		}
	})
}

// TestWriteCheckSeeds regenerates the committed seed corpus.
func TestWriteCheckSeeds(t *testing.T) {
	if os.Getenv("HALLMARK_WRITE_SEEDS") == "" {
		t.Skip("set HALLMARK_WRITE_SEEDS=1 to rewrite testdata/fuzz/FuzzCheck")
	}
	ks := testKeys()
	good := x509.CertificateRequest{DNSNames: []string{"a.example", "*.b.example"}, IPAddresses: []net.IP{net.ParseIP("192.0.2.1")}}
	seeds := map[string][]byte{}
	for _, name := range []string{"p256", "p384", "rsa2048", "ed25519"} {
		seeds["valid-"+name] = mkCSR(t, ks[name], good)
	}
	withCN := good
	withCN.Subject = pkix.Name{CommonName: "a.example"}
	seeds["valid-cn"] = mkCSR(t, ks["p256"], withCN)
	u, _ := url.Parse("https://a.example/")
	withURI := good
	withURI.URIs = []*url.URL{u}
	seeds["uri"] = mkCSR(t, ks["p256"], withURI)
	ca := good
	ca.ExtraExtensions = []pkix.Extension{ext(t, oidBasicConstraints, struct{ IsCA bool }{true})}
	seeds["ca"] = mkCSR(t, ks["p256"], ca)
	seeds["othername"] = mkCSR(t, ks["p256"], x509.CertificateRequest{ExtraExtensions: []pkix.Extension{rawSAN(t, 0, []byte{6, 1, 42, 0xa0, 2, 5, 0}, true)}})
	unknown := good
	unknown.ExtraExtensions = []pkix.Extension{ext(t, asn1.ObjectIdentifier{1, 2, 3, 4}, 1)}
	seeds["unknown-ext"] = mkCSR(t, ks["p256"], unknown)
	seeds["weak-rsa"] = mkCSR(t, ks["rsa1024"], good)
	dir := filepath.Join("testdata", "fuzz", "FuzzCheck")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range seeds {
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, "seed-"+name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSeedCorpus keeps the committed corpus meaningful: the seeds named
// valid-* must still be accepted, the others refused.
func TestSeedCorpus(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("testdata", "fuzz", "FuzzCheck")
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("no seed corpus in %s: %v", dir, err)
	}
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitN(string(raw), "\n", 3)
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if lines[0] != "go test fuzz v1" || err != nil {
			t.Fatalf("%s is not a corpus file: %v", e.Name(), err)
		}
		_, err = Check([]byte(s), fuzzWant, []string{"rsa2048", "p256", "p384", "ed25519"})
		if valid := strings.HasPrefix(e.Name(), "seed-valid-"); valid != (err == nil) {
			t.Errorf("%s: err = %v", e.Name(), err)
		}
	}
}
