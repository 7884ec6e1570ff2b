package csr

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/asn1"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/goodkey"
)

// MinRSABits is the smallest RSA key ever accepted, whatever a profile says.
const MinRSABits = 2048

var (
	oidSubjectAltName   = asn1.ObjectIdentifier{2, 5, 29, 17}
	oidKeyUsage         = asn1.ObjectIdentifier{2, 5, 29, 15}
	oidExtKeyUsage      = asn1.ObjectIdentifier{2, 5, 29, 37}
	oidBasicConstraints = asn1.ObjectIdentifier{2, 5, 29, 19}
	oidSubjectKeyID     = asn1.ObjectIdentifier{2, 5, 29, 14}
	oidTLSFeature       = asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 1, 24} // OCSP must-staple (RFC 7633)
	oidCommonName       = asn1.ObjectIdentifier{2, 5, 4, 3}
)

// harmless are the extension requests a CSR may carry. The signer ignores
// them all (it builds extensions from the profile), but anything outside
// this list is refused so a client learns it will not get what it asked for.
var harmless = map[string]bool{
	oidSubjectAltName.String(): true,
	oidKeyUsage.String():       true,
	oidExtKeyUsage.String():    true,
	oidSubjectKeyID.String():   true,
	oidTLSFeature.String():     true,
	// basicConstraints is allowed only with cA false; checked below.
	oidBasicConstraints.String(): true,
}

// goodSignature are the CSR signature algorithms accepted. Go's
// CertificateRequest.CheckSignature still accepts SHA-1, which we do not.
var goodSignature = map[x509.SignatureAlgorithm]bool{
	x509.SHA256WithRSA: true, x509.SHA384WithRSA: true, x509.SHA512WithRSA: true,
	x509.SHA256WithRSAPSS: true, x509.SHA384WithRSAPSS: true, x509.SHA512WithRSAPSS: true,
	x509.ECDSAWithSHA256: true, x509.ECDSAWithSHA384: true, x509.ECDSAWithSHA512: true,
	x509.PureEd25519: true,
}

// Check parses a DER CSR and checks it against the order's identifiers
// (want) and the profile's key types (names as in configuration: "rsa2048",
// "rsa3072", "rsa4096", "p256", "p384", "ed25519"). Every refusal is badCSR
// (RFC 8555 §7.4: "the CSR is unacceptable"), whose detail says what to
// change. The names compared are the DNS and IP subjectAltNames and the
// common name, which must repeat one of them; DNS names compare
// case-insensitively and IP addresses in canonical form.
func Check(der []byte, want []acme.Identifier, keyTypes []string) (*x509.CertificateRequest, error) {
	req, err := x509.ParseCertificateRequest(der)
	if err != nil {
		return nil, badCSR("the CSR cannot be parsed: %v", err)
	}
	if !goodSignature[req.SignatureAlgorithm] {
		return nil, badCSR("the CSR is signed with %s, which is not accepted; use SHA-256 or stronger with RSA or ECDSA, or Ed25519", req.SignatureAlgorithm)
	}
	if err := req.CheckSignature(); err != nil {
		return nil, badCSR("the CSR's signature does not verify with its public key")
	}
	if err := checkKey(req.PublicKey, keyTypes); err != nil {
		return nil, err
	}
	if err := checkExtensions(req); err != nil {
		return nil, err
	}
	if err := checkNames(req, want); err != nil {
		return nil, err
	}
	return req, nil
}

func badCSR(format string, args ...any) error { return acme.New(acme.ProblemBadCSR, format, args...) }

// keyType names a public key as configuration does, or says why it is
// unacceptable whatever the profile.
func keyType(pub any) (string, error) {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		n := k.N.BitLen()
		if n < MinRSABits {
			return "", badCSR("the CSR's key is a %d-bit RSA key; RSA keys must be at least %d bits", n, MinRSABits)
		}
		return fmt.Sprintf("rsa%d", n), nil
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return "p256", nil
		case elliptic.P384():
			return "p384", nil
		}
		return "", badCSR("the CSR's key is an ECDSA key on %s; only P-256 and P-384 are supported", k.Curve.Params().Name)
	case ed25519.PublicKey:
		return "ed25519", nil
	}
	return "", badCSR("the CSR's key type %T is not supported", pub)
}

func checkKey(pub any, allowed []string) error {
	kt, err := keyType(pub)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(allowed, func(a string) bool { return strings.EqualFold(a, kt) }) {
		return badCSR("the CSR's key is %s, which this profile does not accept; use one of: %s", kt, strings.Join(allowed, ", "))
	}
	// A key whose private half can be computed from the CSR: refused here,
	// where the client can act on it, rather than by the worker's lint.
	if err := goodkey.Check(pub); err != nil {
		return badCSR("the CSR's key is unsafe to certify: %v; generate a new key", err)
	}
	return nil
}

func checkExtensions(req *x509.CertificateRequest) error {
	for _, ext := range req.Extensions {
		id := ext.Id.String()
		if !harmless[id] {
			return badCSR("the CSR requests extension %s, which this CA does not honour; remove it", id)
		}
		if ext.Id.Equal(oidBasicConstraints) {
			var bc struct {
				IsCA       bool `asn1:"optional"`
				MaxPathLen int  `asn1:"optional,default:-1"`
			}
			rest, err := asn1.Unmarshal(ext.Value, &bc)
			if err != nil || len(rest) != 0 {
				return badCSR("the CSR's basicConstraints request cannot be parsed")
			}
			if bc.IsCA {
				return badCSR("the CSR asks for a CA certificate (basicConstraints cA=true); this CA issues only end-entity certificates")
			}
		}
		if ext.Id.Equal(oidSubjectAltName) {
			if err := checkSANTypes(ext.Value); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkSANTypes refuses every GeneralName but dNSName and iPAddress. Go's
// parser silently drops otherName, directoryName and registeredID, so they
// are read here from the raw extension.
func checkSANTypes(value []byte) error {
	in := cryptobyte.String(value)
	var seq cryptobyte.String
	if !in.ReadASN1(&seq, cbasn1.SEQUENCE) || !in.Empty() {
		return badCSR("the CSR's subjectAltName extension cannot be parsed")
	}
	for !seq.Empty() {
		var tag cbasn1.Tag
		var gn cryptobyte.String
		if !seq.ReadAnyASN1(&gn, &tag) {
			return badCSR("the CSR's subjectAltName extension cannot be parsed")
		}
		switch tag {
		case cbasn1.Tag(2).ContextSpecific(): // dNSName
		case cbasn1.Tag(7).ContextSpecific(): // iPAddress
		case cbasn1.Tag(1).ContextSpecific():
			return badCSR("the CSR has an email address subjectAltName; only DNS names and IP addresses can be certified")
		case cbasn1.Tag(6).ContextSpecific():
			return badCSR("the CSR has a URI subjectAltName; only DNS names and IP addresses can be certified")
		default:
			return badCSR("the CSR has a subjectAltName of a type other than DNS name or IP address; only those can be certified")
		}
	}
	return nil
}

// checkNames checks that req asks for exactly the order's identifiers
// (want): its subjectAltNames and common name, as keys.
func checkNames(req *x509.CertificateRequest, want []acme.Identifier) error {
	if len(req.EmailAddresses) > 0 {
		return badCSR("the CSR has an email address subjectAltName; only DNS names and IP addresses can be certified")
	}
	if len(req.URIs) > 0 {
		return badCSR("the CSR has a URI subjectAltName; only DNS names and IP addresses can be certified")
	}
	cns := 0
	for _, atv := range req.Subject.Names {
		if atv.Type.Equal(oidCommonName) {
			cns++
		}
	}
	if cns > 1 {
		return badCSR("the CSR's subject has %d common names; at most one is allowed", cns)
	}

	have := map[string]bool{}
	for _, d := range req.DNSNames {
		have[dnsKey(d)] = true
	}
	for _, ip := range req.IPAddresses {
		k, ok := ipKey(ip)
		if !ok {
			return badCSR("the CSR has an IP address subjectAltName that is not a valid IPv4 or IPv6 address")
		}
		have[k] = true
	}
	if cn := req.Subject.CommonName; cn != "" {
		// RFC 8555 §7.4: a dns identifier may appear in the common name,
		// in the subjectAltNames, or both, so a common name counts as one
		// more requested name. An IP address has no such allowance
		// (RFC 8738 puts it in the subjectAltNames): as a common name it
		// must repeat one of them.
		if ip, err := netip.ParseAddr(cn); err == nil {
			if !have["ip:"+ip.Unmap().String()] {
				return badCSR("the CSR's common name %q is an IP address not among its subjectAltNames; an IP address must be requested as a subjectAltName", cn)
			}
		} else {
			have[dnsKey(cn)] = true
		}
	}

	wanted := wantedNames(want)
	var missing, extra []string
	for k := range wanted {
		if !have[k] {
			missing = append(missing, k)
		}
	}
	for k := range have {
		if !wanted[k] {
			extra = append(extra, k)
		}
	}
	if len(missing) == 0 && len(extra) == 0 {
		return nil
	}
	sort.Strings(missing)
	sort.Strings(extra)
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, "missing "+strings.Join(missing, ", "))
	}
	if len(extra) > 0 {
		parts = append(parts, "not in the order "+strings.Join(extra, ", "))
	}
	return badCSR("the CSR's names must be exactly the order's identifiers: %s", strings.Join(parts, "; "))
}

// wantedNames are the order's identifiers as the keys checkNames compares
// (dnsKey, and ipKey's form).
func wantedNames(want []acme.Identifier) map[string]bool {
	wanted := map[string]bool{}
	for _, id := range want {
		switch id.Type {
		case acme.IdentifierDNS:
			wanted[dnsKey(id.Value)] = true
		case acme.IdentifierIP:
			if ip, err := netip.ParseAddr(id.Value); err == nil {
				wanted["ip:"+ip.Unmap().String()] = true
			} else {
				wanted["ip:"+id.Value] = true
			}
		default:
			wanted[string(id.Type)+":"+id.Value] = true
		}
	}
	return wanted
}

func dnsKey(name string) string {
	return "dns:" + strings.TrimSuffix(strings.ToLower(name), ".")
}

func ipKey(ip net.IP) (string, bool) {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return "", false
	}
	return "ip:" + a.Unmap().String(), true
}
