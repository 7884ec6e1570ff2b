package signer

import (
	"context"
	"crypto"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	zx509 "github.com/zmap/zcrypto/x509"
	"github.com/zmap/zlint/v3"
	"github.com/zmap/zlint/v3/lint"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/profile"
)

const (
	testIssuerURL = "http://127.0.0.1:14000/issuer/test"
	testCRLURL    = "http://127.0.0.1:14000/crl/test"
)

func dns(v string) acme.Identifier { return acme.Identifier{Type: acme.IdentifierDNS, Value: v} }
func ip(v string) acme.Identifier  { return acme.Identifier{Type: acme.IdentifierIP, Value: v} }

func defaultProfile() profile.Profile { return profile.Default() }

func request(p profile.Profile, pub any, names ...acme.Identifier) Request {
	return Request{Profile: p, ProfileName: "test", Names: names, PublicKey: pub, IssuerURL: testIssuerURL, CRLURL: testCRLURL}
}

// verifyFor checks that the PEM chain Issue returned verifies to the root for
// the given host name or IP, as a TLS client would.
func verifyFor(t *testing.T, out *Issued, roots *x509.CertPool, host string) {
	t.Helper()
	var certs []*x509.Certificate
	rest := out.ChainPEM
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		certs = append(certs, c)
	}
	if len(certs) < 2 {
		t.Fatalf("ChainPEM holds %d certificates, want the leaf and the issuer", len(certs))
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: host}); err != nil {
		t.Errorf("verifying for %q: %v", host, err)
	}
}

func TestIssue(t *testing.T) {
	t.Parallel()
	names := []acme.Identifier{dns("www.example.com"), dns("*.example.com"), dns("build.corp"), ip("10.0.0.5"), ip("2001:db8::1")}
	for _, issuerKind := range []string{"p256", "p384", "rsa2048"} {
		iss, counter, roots := testCA(t, issuerKind, 5*365*24*time.Hour)
		for _, leafKind := range []string{"p256", "p384", "rsa2048"} {
			t.Run(issuerKind+"/"+leafKind, func(t *testing.T) {
				t.Parallel()
				pub := testKey(t, leafKind).Public()
				before := time.Now()
				out, err := iss.Issue(context.Background(), request(defaultProfile(), pub, names...))
				if err != nil {
					t.Fatal(err)
				}
				if counter.calls.Load() == 0 {
					t.Error("the issuer's key never signed")
				}
				leaf, err := x509.ParseCertificate(out.DER)
				if err != nil {
					t.Fatal(err)
				}
				for _, host := range []string{"www.example.com", "anything.example.com", "build.corp", "10.0.0.5", "2001:db8::1"} {
					verifyFor(t, out, roots, host)
				}
				// Exactly the order's names.
				if want := []string{"www.example.com", "*.example.com", "build.corp"}; !slices.Equal(leaf.DNSNames, want) {
					t.Errorf("DNS names %v, want %v", leaf.DNSNames, want)
				}
				if len(leaf.IPAddresses) != 2 || !leaf.IPAddresses[0].Equal(net.ParseIP("10.0.0.5")) || !leaf.IPAddresses[1].Equal(net.ParseIP("2001:db8::1")) {
					t.Errorf("IP addresses %v", leaf.IPAddresses)
				}
				if leaf.Subject.CommonName != "" || len(leaf.EmailAddresses) != 0 || len(leaf.URIs) != 0 {
					t.Errorf("unexpected subject %q or other SANs", leaf.Subject)
				}
				if !leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool }).Equal(pub) {
					t.Error("the certificate does not carry the CSR's public key")
				}
				// Serial.
				if leaf.SerialNumber.Sign() <= 0 || leaf.SerialNumber.BitLen() < 64 {
					t.Errorf("serial %x has %d bits", leaf.SerialNumber, leaf.SerialNumber.BitLen())
				}
				if out.SerialHex != hex.EncodeToString(leaf.SerialNumber.Bytes()) || len(out.SerialHex) != 32 || out.Serial.Cmp(leaf.SerialNumber) != 0 {
					t.Errorf("SerialHex %q, serial %x", out.SerialHex, leaf.SerialNumber)
				}
				// Validity: 90 days inclusive, backdated at most a minute.
				if d := leaf.NotAfter.Sub(leaf.NotBefore) + time.Second; d != 90*24*time.Hour {
					t.Errorf("validity %v, want 2160h", d)
				}
				if leaf.NotBefore.Before(before.Add(-time.Minute-time.Second)) || leaf.NotBefore.After(time.Now()) {
					t.Errorf("NotBefore %v is not within a minute before issuance (%v)", leaf.NotBefore, before)
				}
				if !out.NotBefore.Equal(leaf.NotBefore) || !out.NotAfter.Equal(leaf.NotAfter) {
					t.Error("Issued validity differs from the certificate's")
				}
				// Extensions.
				if leaf.IsCA || !leaf.BasicConstraintsValid {
					t.Error("leaf must carry basicConstraints cA=false")
				}
				if !slices.Equal(leaf.IssuingCertificateURL, []string{testIssuerURL}) || !slices.Equal(leaf.CRLDistributionPoints, []string{testCRLURL}) {
					t.Errorf("AIA %v, CRLDP %v", leaf.IssuingCertificateURL, leaf.CRLDistributionPoints)
				}
				if len(leaf.OCSPServer) != 0 {
					t.Errorf("OCSP %v", leaf.OCSPServer)
				}
				if len(leaf.SubjectKeyId) != 20 || !slices.Equal(leaf.AuthorityKeyId, iss.Cert.SubjectKeyId) {
					t.Errorf("SKI %x AKI %x (issuer SKI %x)", leaf.SubjectKeyId, leaf.AuthorityKeyId, iss.Cert.SubjectKeyId)
				}
				wantKU := x509.KeyUsageDigitalSignature
				if _, isRSA := pub.(*rsa.PublicKey); isRSA {
					wantKU |= x509.KeyUsageKeyEncipherment
				}
				if leaf.KeyUsage != wantKU {
					t.Errorf("key usage %b, want %b", leaf.KeyUsage, wantKU)
				}
				if !slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
					t.Errorf("EKU %v", leaf.ExtKeyUsage)
				}
				if err := leaf.CheckSignatureFrom(iss.Cert); err != nil {
					t.Errorf("signature: %v", err)
				}
				// zlint over the real certificate: nothing at Error or Fatal
				// among the lints that apply.
				assertLintClean(t, out.DER)
			})
		}
	}
}

func assertLintClean(t *testing.T, der []byte) {
	t.Helper()
	reg, err := lintRegistry()
	if err != nil {
		t.Fatal(err)
	}
	zc, err := zx509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range zlint.LintCertificateEx(zc, reg).Results {
		if r.Status >= lint.Error {
			t.Errorf("zlint %s: %s %s", name, r.Status, r.Details)
		}
	}
}

func TestIssueSerialsDiffer(t *testing.T) {
	t.Parallel()
	iss, _, _ := testCA(t, "p256", 5*365*24*time.Hour)
	seen := map[string]bool{}
	for range 20 {
		out, err := iss.Issue(context.Background(), request(defaultProfile(), testKey(t, "p256").Public(), dns("a.example.com")))
		if err != nil {
			t.Fatal(err)
		}
		if seen[out.SerialHex] {
			t.Fatalf("serial %s issued twice", out.SerialHex)
		}
		seen[out.SerialHex] = true
	}
}

func TestIssueValidity(t *testing.T) {
	t.Parallel()
	iss, _, _ := testCA(t, "p256", 5*365*24*time.Hour)
	at := func(d time.Duration) *time.Time { v := time.Now().Add(d); return &v }
	shortLived := defaultProfile()
	shortLived.ValidityHours = 24
	requestable := shortLived
	requestable.AllowValidityRequest = true
	weekLong := requestable
	weekLong.ValidityHours = 7 * 24
	tests := []struct {
		name                string
		profile             profile.Profile
		notBefore, notAfter *time.Time
		want                time.Duration // NotAfter-NotBefore+1s
		wantProblem         acme.ProblemType
	}{
		{name: "short-lived profile", profile: shortLived, want: 24 * time.Hour},
		{name: "request ignored when not allowed", profile: shortLived, notAfter: at(2 * time.Hour), want: 24 * time.Hour},
		{name: "requested notAfter honoured", profile: requestable, notAfter: at(6 * time.Hour), want: 6*time.Hour + time.Minute + time.Second},
		{name: "requested window honoured", profile: requestable, notBefore: at(time.Hour), notAfter: at(3 * time.Hour), want: 2*time.Hour + time.Second},
		// RFC 8555 §7.4: a requested notBefore is what the certificate
		// says, even after the order waited to be finalized, within the
		// 48 hours of backdating the Baseline Requirements allow.
		{name: "notBefore an hour past kept", profile: requestable, notBefore: at(-time.Hour), want: 24 * time.Hour},
		{name: "notBefore 47 hours past kept", profile: weekLong, notBefore: at(-47 * time.Hour), want: 7 * 24 * time.Hour},
		{name: "notBefore 49 hours past refused", profile: weekLong, notBefore: at(-49 * time.Hour), wantProblem: acme.ProblemMalformed},
		{name: "notBefore past the profile's validity refused", profile: requestable, notBefore: at(-25 * time.Hour), wantProblem: acme.ProblemMalformed},
		{name: "requested notAfter passed refused", profile: requestable, notBefore: at(-3 * time.Hour), notAfter: at(-time.Hour), wantProblem: acme.ProblemMalformed},
		{name: "requested window partly past kept", profile: requestable, notBefore: at(-3 * time.Hour), notAfter: at(time.Hour), want: 4*time.Hour + time.Second},
		// A notAfter the frontend accepted (within the profile's validity
		// of the order's placing) is honoured: the backdate gives way.
		{name: "requested notAfter at the profile's validity", profile: requestable, notAfter: at(24*time.Hour - time.Second), want: 24 * time.Hour},
		{name: "requested notAfter near the profile's validity", profile: requestable, notAfter: at(24*time.Hour - 30*time.Second), want: 24 * time.Hour},
		{name: "requested validity beyond the profile", profile: requestable, notAfter: at(25 * time.Hour), wantProblem: acme.ProblemMalformed},
		{name: "requested window of the profile's validity, counting both ends", profile: requestable, notBefore: at(time.Hour), notAfter: at(25 * time.Hour), wantProblem: acme.ProblemMalformed},
		{name: "notAfter before notBefore", profile: requestable, notBefore: at(2 * time.Hour), notAfter: at(time.Hour), wantProblem: acme.ProblemMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := request(tc.profile, testKey(t, "p256").Public(), dns("a.example.com"))
			r.NotBefore, r.NotAfter = tc.notBefore, tc.notAfter
			start := time.Now()
			out, err := iss.Issue(context.Background(), r)
			if tc.wantProblem != "" {
				assertProblem(t, err, tc.wantProblem)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := out.NotAfter.Sub(out.NotBefore) + time.Second
			// Requested times are truncated to the second; allow for it.
			if diff := got - tc.want; diff < -2*time.Second || diff > 2*time.Second {
				t.Errorf("validity %v, want %v", got, tc.want)
			}
			leaf, err := x509.ParseCertificate(out.DER)
			if err != nil {
				t.Fatal(err)
			}
			if !leaf.NotBefore.Equal(out.NotBefore) || !leaf.NotAfter.Equal(out.NotAfter) {
				t.Errorf("certificate says %v–%v, Issued says %v–%v", leaf.NotBefore, leaf.NotAfter, out.NotBefore, out.NotAfter)
			}
			switch {
			case tc.notBefore != nil && tc.profile.AllowValidityRequest:
				if want := tc.notBefore.Truncate(time.Second); !leaf.NotBefore.Equal(want) {
					t.Errorf("NotBefore %v, want the requested %v", leaf.NotBefore, want)
				}
			case leaf.NotBefore.Before(start.Add(-time.Minute - time.Second)):
				t.Errorf("NotBefore %v backdated more than a minute before %v", leaf.NotBefore, start)
			}
			if tc.notAfter != nil && tc.profile.AllowValidityRequest {
				if want := tc.notAfter.Truncate(time.Second); !leaf.NotAfter.Equal(want) {
					t.Errorf("NotAfter %v, want the requested %v", leaf.NotAfter, want)
				}
			}
			assertLintClean(t, out.DER)
		})
	}
}

func assertProblem(t *testing.T, err error, want acme.ProblemType) {
	t.Helper()
	var ae *acme.Error
	if !errors.As(err, &ae) {
		t.Fatalf("got %v, want an *acme.Error of type %s", err, want)
	}
	if ae.Problem.Type != want {
		t.Fatalf("got problem %s (%s), want %s", ae.Problem.Type, ae.Problem.Detail, want)
	}
}

func TestIssueSetCN(t *testing.T) {
	t.Parallel()
	iss, _, _ := testCA(t, "p256", 5*365*24*time.Hour)
	p := defaultProfile()
	p.SetCN = true
	long := strings.Repeat("a", 60) + ".example.com" // 72 characters: too long for a CN
	tests := []struct {
		names []acme.Identifier
		cn    string
	}{
		{[]acme.Identifier{dns("first.example.com"), dns("second.example.com")}, "first.example.com"},
		{[]acme.Identifier{dns(long), dns("short.example.com")}, "short.example.com"},
		{[]acme.Identifier{ip("10.0.0.1"), dns("host.example.com")}, "host.example.com"},
		{[]acme.Identifier{ip("10.0.0.1")}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.cn, func(t *testing.T) {
			t.Parallel()
			out, err := iss.Issue(context.Background(), request(p, testKey(t, "p256").Public(), tc.names...))
			if err != nil {
				t.Fatal(err)
			}
			leaf, _ := x509.ParseCertificate(out.DER)
			if leaf.Subject.CommonName != tc.cn {
				t.Errorf("CN %q, want %q", leaf.Subject.CommonName, tc.cn)
			}
			assertLintClean(t, out.DER)
		})
	}
}

// TestIssueRefuses covers requests the signer refuses before anything is
// signed: the issuer's key is never used.
func TestIssueRefuses(t *testing.T) {
	t.Parallel()
	onlyP256 := defaultProfile()
	onlyP256.KeyTypes = []string{"p256"}
	noWild := defaultProfile()
	noWild.AllowWildcards = false
	dnsOnly := defaultProfile()
	dnsOnly.IdentifierTypes = []string{"dns"}
	encipherOnly := defaultProfile()
	encipherOnly.KeyUsages = []string{"keyEncipherment"}
	tests := []struct {
		name    string
		profile profile.Profile
		key     string
		names   []acme.Identifier
		want    acme.ProblemType
	}{
		{"key type not in the profile", onlyP256, "rsa2048", []acme.Identifier{dns("a.example.com")}, acme.ProblemBadCSR},
		{"short RSA key", defaultProfile(), "rsa1024", []acme.Identifier{dns("a.example.com")}, acme.ProblemBadCSR},
		{"unsupported curve", defaultProfile(), "p521", []acme.Identifier{dns("a.example.com")}, acme.ProblemBadCSR},
		{"wildcard not allowed", noWild, "p256", []acme.Identifier{dns("*.example.com")}, acme.ProblemRejectedIdentifier},
		{"ip not allowed", dnsOnly, "p256", []acme.Identifier{ip("10.0.0.1")}, acme.ProblemRejectedIdentifier},
		{"not an ip", defaultProfile(), "p256", []acme.Identifier{ip("10.0.0")}, acme.ProblemRejectedIdentifier},
		{"unknown identifier type", defaultProfile(), "p256", []acme.Identifier{{Type: "email", Value: "a@example.com"}}, acme.ProblemUnsupportedIdentifier},
		{"no identifiers", defaultProfile(), "p256", nil, acme.ProblemMalformed},
		// BR §7.1.2.7.11: a leaf with no keyUsage is never signed, here
		// an ECDSA key whose only listed usage it cannot assert (RFC 8813).
		{"no key usage left", encipherOnly, "p256", []acme.Identifier{dns("a.example.com")}, acme.ProblemServerInternal},
	}
	iss, counter, _ := testCA(t, "p256", 5*365*24*time.Hour)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := iss.Issue(context.Background(), request(tc.profile, testKey(t, tc.key).Public(), tc.names...))
			assertProblem(t, err, tc.want)
		})
	}
	t.Cleanup(func() {
		if n := counter.calls.Load(); n != 0 {
			t.Errorf("the issuer's key signed %d times for refused requests", n)
		}
	})
}

type lintCase struct {
	name      string
	profile   profile.Profile
	names     []acme.Identifier
	hook      func(*x509.Certificate) // the test-only seam: corrupts the template
	pub       crypto.PublicKey        // the subscriber's key; nil: a fresh P-256 key
	wantLints []string                // substrings of failed lint names
	// problem is the refusal's type: serverInternal (the zero value
	// here) for the CA's fault, badCSR for the subscriber's key's.
	problem acme.ProblemType
}

// smallScalarKey is the P-256 public key whose private scalar is d: anyone
// can recover it from the key.
func smallScalarKey(t *testing.T, d byte) *ecdsa.PublicKey {
	t.Helper()
	raw := make([]byte, 32)
	raw[31] = d
	priv, err := ecdh.P256().NewPrivateKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), priv.PublicKey().Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// TestIssueLintRefusal proves lint-before-sign: a certificate zlint rejects
// is never signed by the issuer's key.
func TestIssueLintRefusal(t *testing.T) {
	// Not parallel: it sets the package's template hook.
	tooLong := defaultProfile()
	tooLong.ValidityHours = 400 * 24
	noEKU := defaultProfile()
	noEKU.ExtKeyUsages = nil
	tests := []lintCase{
		{name: "empty subjectAltName (hook)", profile: defaultProfile(), names: []acme.Identifier{dns("a.example.com")},
			hook:      func(c *x509.Certificate) { c.DNSNames = nil },
			wantLints: []string{"e_ext_san_missing"}},
		{name: "bad character in a name", profile: defaultProfile(), names: []acme.Identifier{dns("bad name.example.com")},
			wantLints: []string{"e_dnsname_bad_character_in_label"}},
		{name: "validity beyond the BR maximum", profile: tooLong, names: []acme.Identifier{dns("a.example.com")},
			// Which lint fires depends on the date: the BR maximum shrinks
			// from 398 days to 200 (2026-03-15), 100 (2027) and 47 (2029).
			wantLints: []string{"valid_time_longer_than_"}},
		// Real mistakes a worker or an operator could make:
		{name: "no AIA or CRL URL", profile: defaultProfile(), names: []acme.Identifier{dns("a.example.com")},
			hook:      func(c *x509.Certificate) { c.IssuingCertificateURL, c.CRLDistributionPoints = nil, nil },
			wantLints: []string{"e_missing_crl_distrib_point", "e_sub_cert_aia_missing"}},
		{name: "profile without extended key usage", profile: noEKU, names: []acme.Identifier{dns("a.example.com")},
			wantLints: []string{"e_sub_cert_eku_missing"}},
		// A subscriber key anyone can recover from its public half.
		{name: "subscriber key with a tiny private scalar", profile: defaultProfile(), names: []acme.Identifier{dns("a.example.com")},
			pub: smallScalarKey(t, 7), wantLints: []string{"e_ecdsa_small_private_key"}, problem: acme.ProblemBadCSR},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			iss, counter, _ := testCA(t, "p256", 5*365*24*time.Hour)
			testHookTemplate = tc.hook
			defer func() { testHookTemplate = nil }()
			pub := tc.pub
			if pub == nil {
				pub = testKey(t, "p256").Public()
			}
			_, err := iss.Issue(context.Background(), request(tc.profile, pub, tc.names...))
			want := tc.problem
			if want == "" {
				want = acme.ProblemServerInternal
			}
			assertProblem(t, err, want)
			var le *LintError
			if !errors.As(err, &le) {
				t.Fatalf("got %v, want a *LintError cause", err)
			}
			for _, want := range tc.wantLints {
				if !slices.ContainsFunc(le.Names(), func(n string) bool { return strings.Contains(n, want) }) {
					t.Errorf("lint %s not among the failures %v", want, le.Names())
				}
			}
			if n := counter.calls.Load(); n != 0 {
				t.Errorf("the issuer's key signed %d times after lint refused", n)
			}
		})
	}
}

func TestIssueRefusesBeyondIssuerExpiry(t *testing.T) {
	t.Parallel()
	iss, counter, _ := testCA(t, "p256", 30*24*time.Hour)
	_, err := iss.Issue(context.Background(), request(defaultProfile(), testKey(t, "p256").Public(), dns("a.example.com")))
	assertProblem(t, err, acme.ProblemServerInternal)
	if !strings.Contains(err.Error(), "rotate the intermediate") {
		t.Errorf("error does not tell the operator what to do: %v", err)
	}
	if counter.calls.Load() != 0 {
		t.Error("signed anyway")
	}
}

func TestIssueCancelled(t *testing.T) {
	t.Parallel()
	iss, counter, _ := testCA(t, "p256", 5*365*24*time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := iss.Issue(ctx, request(defaultProfile(), testKey(t, "p256").Public(), dns("a.example.com"))); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if counter.calls.Load() != 0 {
		t.Error("signed for a cancelled job")
	}
}

func TestNewIssuerRefusesAMismatchedKey(t *testing.T) {
	t.Parallel()
	iss, _, _ := testCA(t, "p256", 5*365*24*time.Hour)
	if _, err := NewIssuer(iss.Cert, nil, newKey(t, "p256")); err == nil {
		t.Fatal("NewIssuer accepted a key that does not belong to the certificate")
	}
}
