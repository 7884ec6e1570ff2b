package signer

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/profile"
)

// Request is one issuance.
type Request struct {
	Profile     profile.Profile
	ProfileName string
	// OrderID is the Hallmark order the certificate is for: a backend
	// that starts work elsewhere for it (a relay's upstream order)
	// journals that work under it, so any worker's retry can resume it.
	OrderID string
	// Names are the ORDER's identifiers (dns, including wildcards, and ip):
	// the only source of the certificate's names.
	Names []acme.Identifier
	// PublicKey comes from the CSR; nothing else from the CSR is used.
	PublicKey crypto.PublicKey
	// NotBefore and NotAfter are the order's requested validity, honoured
	// only if Profile.AllowValidityRequest.
	NotBefore, NotAfter *time.Time
	IssuerURL           string // AIA caIssuers URL
	CRLURL              string // CRL distribution point URL
}

// Issued is a signed certificate.
type Issued struct {
	Serial    *big.Int
	SerialHex string // lowercase hex, 32 digits
	DER       []byte
	// ChainPEM is the leaf then the issuer's Chain, PEM-encoded: what
	// RFC 8555 §7.4.2 serves as application/pem-certificate-chain.
	ChainPEM            []byte
	NotBefore, NotAfter time.Time
}

// maxRequestedBackdate bounds how far before the moment of signing a
// notBefore the client asked for is still honoured. The frontend accepted
// it when the order was placed (no earlier than a minute before then), but
// the order may wait days to be finalized; RFC 8555 §7.4 forbids issuing
// another notBefore than the requested one, so the signer keeps it, within
// the CA/Browser Forum's bound for subscriber certificates (Baseline
// Requirements 2.0 §7.1.2.7: notBefore within 48 hours of signing), and
// refuses the issuance beyond it rather than backdate further.
const maxRequestedBackdate = 48 * time.Hour

// defaultKeyTypes apply to a profile that lists none.
var defaultKeyTypes = []string{"rsa2048", "rsa3072", "rsa4096", "p256", "p384"}

var keyUsageByName = map[string]x509.KeyUsage{
	"digitalSignature": x509.KeyUsageDigitalSignature,
	"keyEncipherment":  x509.KeyUsageKeyEncipherment,
}

var extKeyUsageByName = map[string]x509.ExtKeyUsage{
	"serverAuth": x509.ExtKeyUsageServerAuth,
	"clientAuth": x509.ExtKeyUsageClientAuth,
}

// KeyType names a public key the way profile.Profile.KeyTypes does: "rsa2048",
// "rsa3072", "rsa4096", "p256", "p384" or "ed25519". Other keys are an error.
func KeyType(pub crypto.PublicKey) (string, error) {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		switch bits := k.N.BitLen(); bits {
		case 2048, 3072, 4096:
			return fmt.Sprintf("rsa%d", bits), nil
		default:
			return "", fmt.Errorf("an RSA key of %d bits is not supported; use 2048, 3072 or 4096 bits", bits)
		}
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return "p256", nil
		case elliptic.P384():
			return "p384", nil
		}
		return "", fmt.Errorf("an ECDSA key on curve %s is not supported; use P-256 or P-384", k.Curve.Params().Name)
	case ed25519.PublicKey:
		return "ed25519", nil
	case nil:
		return "", errors.New("the CSR carries no public key")
	}
	return "", fmt.Errorf("a public key of type %T is not supported", pub)
}

// testHookTemplate, when set by a test, may corrupt the template after it is
// built and before it is linted: it is how the tests prove that a template
// failing lint never reaches the real key.
var testHookTemplate func(*x509.Certificate)

// Issue builds the certificate for r from its profile and the order's names,
// lints it (signed by a throwaway key of the issuer's type), and only if the
// lints pass signs the same tbsCertificate with the issuer's key.
//
// A request the profile does not allow (a key type it does not list, an
// identifier type or wildcard it does not allow, a validity it does not allow)
// returns an *acme.Error with a client problem type: the order becomes
// invalid. A lint failure returns a serverInternal *acme.Error whose Cause is
// a *LintError naming the lints.
func (i *Issuer) Issue(ctx context.Context, r Request) (*Issued, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	tmpl, err := i.template(r, time.Now())
	if err != nil {
		return nil, err
	}
	if testHookTemplate != nil {
		testHookTemplate(tmpl)
	}
	log := i.logger().With("issuer", i.ID, "profile", r.ProfileName, "serial", SerialHex(tmpl.SerialNumber),
		"names", identifierStrings(r.Names))
	tbs, err := i.lintCertificate(tmpl, r.PublicKey)
	if err != nil {
		log.Error("pre-issuance lint refused the certificate; nothing was signed with the issuer key", "err", err)
		return nil, err
	}
	// The lint may have taken a while (first use generates the throwaway
	// key): do not sign for a job that has already been given up.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	log.Info("signing certificate", "not_before", tmpl.NotBefore, "not_after", tmpl.NotAfter)
	// The tbsCertificate that was linted, not a second encoding of tmpl.
	der, err := i.signLinted(tbs, tmpl.SignatureAlgorithm)
	if err != nil {
		log.Error("signing certificate", "err", err)
		return nil, acme.Internal(fmt.Errorf("signing certificate with issuer %s: %w", i.ID, err))
	}
	log.Info("signed certificate")
	out := &Issued{
		Serial:    tmpl.SerialNumber,
		SerialHex: SerialHex(tmpl.SerialNumber),
		DER:       der,
		NotBefore: tmpl.NotBefore,
		NotAfter:  tmpl.NotAfter,
	}
	var b bytes.Buffer
	_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	for _, c := range i.Chain {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	out.ChainPEM = b.Bytes()
	return out, nil
}

// SerialHex is the form serials take in store rows and URLs: lowercase hex,
// zero-padded to an even number of digits.
func SerialHex(serial *big.Int) string {
	return hex.EncodeToString(serial.Bytes())
}

func identifierStrings(ids []acme.Identifier) []string {
	out := make([]string, len(ids))
	for n, id := range ids {
		out[n] = id.String()
	}
	return out
}

// template builds the certificate r asks for, at time now.
func (i *Issuer) template(r Request, now time.Time) (*x509.Certificate, error) {
	p := r.Profile
	if err := checkKeyType(r); err != nil {
		return nil, err
	}
	dnsNames, ips, err := sans(r)
	if err != nil {
		return nil, err
	}

	notBefore, notAfter, err := validity(r, now)
	if err != nil {
		return nil, err
	}
	if notAfter.After(i.Cert.NotAfter) {
		return nil, acme.Internal(fmt.Errorf("issuer %s expires at %s, before the certificate would (%s): rotate the intermediate or shorten profiles.%s.validity_hours",
			i.ID, i.Cert.NotAfter.Format(time.RFC3339), notAfter.Format(time.RFC3339), r.ProfileName))
	}

	ku, eku, err := keyUsages(r)
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, acme.Internal(err)
	}
	skid, err := SubjectKeyID(r.PublicKey)
	if err != nil {
		return nil, acme.New(acme.ProblemBadCSR, "the CSR's public key cannot be encoded: %v", err)
	}
	sigAlg, err := signatureAlgorithm(i.Signer.Public())
	if err != nil {
		return nil, acme.Internal(err)
	}

	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		SignatureAlgorithm:    sigAlg,
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              ku,
		ExtKeyUsage:           eku,
		BasicConstraintsValid: true,
		IsCA:                  false,
		// RFC 5280 §4.2.1.2 says end-entity certificates SHOULD carry a
		// SKI; CABF BR 2.0 §7.1.2.7.6 says NOT RECOMMENDED (zlint warns,
		// w_ext_subject_key_identifier_not_recommended_subscriber). Kept:
		// private-PKI tooling matches keys by it.
		SubjectKeyId: skid,
		DNSNames:     dnsNames,
		IPAddresses:  ips,
	}
	// With an empty subject, Go marks subjectAltName critical, as
	// RFC 5280 §4.2.1.6 requires.
	if p.SetCN {
		for _, n := range dnsNames {
			// RFC 5280 Appendix A: ub-common-name is 64.
			if len(n) <= 64 {
				tmpl.Subject = pkix.Name{CommonName: n}
				break
			}
		}
	}
	if r.IssuerURL != "" {
		tmpl.IssuingCertificateURL = []string{r.IssuerURL}
	}
	if r.CRLURL != "" {
		tmpl.CRLDistributionPoints = []string{r.CRLURL}
	}
	return tmpl, nil
}

// checkKeyType refuses a key of a type the profile does not accept.
func checkKeyType(r Request) error {
	kt, err := KeyType(r.PublicKey)
	if err != nil {
		return acme.New(acme.ProblemBadCSR, "%s", err)
	}
	allowed := r.Profile.KeyTypes
	if len(allowed) == 0 {
		allowed = defaultKeyTypes
	}
	if !slices.Contains(allowed, kt) {
		return acme.New(acme.ProblemBadCSR, "profile %q does not accept %s keys; it accepts %s", r.ProfileName, kt, strings.Join(allowed, ", "))
	}
	return nil
}

// keyUsages are the profile's key usages for r's key, and its extended
// key usages.
func keyUsages(r Request) (x509.KeyUsage, []x509.ExtKeyUsage, error) {
	p := r.Profile
	var ku x509.KeyUsage
	for _, name := range p.KeyUsages {
		u, ok := keyUsageByName[name]
		if !ok {
			return 0, nil, acme.Internal(fmt.Errorf("profiles.%s.key_usages: unknown key usage %q", r.ProfileName, name))
		}
		// RFC 8813 §3: an ECDSA (or EdDSA) subject key cannot encipher keys,
		// so keyEncipherment is asserted only for RSA keys.
		if u == x509.KeyUsageKeyEncipherment {
			if _, isRSA := r.PublicKey.(*rsa.PublicKey); !isRSA {
				continue
			}
		}
		ku |= u
	}
	if ku == 0 {
		// profile.Validate refuses such a profile at start; this keeps a leaf
		// without keyUsage from being signed whatever the caller checked.
		return 0, nil, acme.Internal(fmt.Errorf("profiles.%s.key_usages %v leave a %T certificate no key usage: add digitalSignature", r.ProfileName, p.KeyUsages, r.PublicKey))
	}
	var eku []x509.ExtKeyUsage
	for _, name := range p.ExtKeyUsages {
		u, ok := extKeyUsageByName[name]
		if !ok {
			return 0, nil, acme.Internal(fmt.Errorf("profiles.%s.ext_key_usages: unknown extended key usage %q", r.ProfileName, name))
		}
		eku = append(eku, u)
	}
	return ku, eku, nil
}

// sans turns the order's identifiers into subjectAltName entries, refusing
// what the profile does not allow (the frontend's policy checks this too; the
// signer does not trust that it did).
func sans(r Request) ([]string, []net.IP, error) {
	if len(r.Names) == 0 {
		return nil, nil, acme.Malformed("the order has no identifiers to put in a certificate")
	}
	allowType := func(t acme.IdentifierType) bool {
		return len(r.Profile.IdentifierTypes) == 0 || slices.Contains(r.Profile.IdentifierTypes, string(t))
	}
	var dnsNames []string
	var ips []net.IP
	seen := map[string]bool{}
	for _, id := range r.Names {
		if id.Type != acme.IdentifierDNS && id.Type != acme.IdentifierIP {
			return nil, nil, acme.New(acme.ProblemUnsupportedIdentifier, "identifier type %q cannot be put in a certificate", id.Type)
		}
		if !allowType(id.Type) {
			return nil, nil, acme.New(acme.ProblemRejectedIdentifier, "profile %q does not issue for %s identifiers (%s)", r.ProfileName, id.Type, id.Value)
		}
		switch id.Type {
		case acme.IdentifierDNS:
			name := strings.ToLower(strings.TrimSuffix(id.Value, "."))
			if id.IsWildcard() && !r.Profile.AllowWildcards {
				return nil, nil, acme.New(acme.ProblemRejectedIdentifier, "profile %q does not issue wildcard certificates (%s)", r.ProfileName, id.Value)
			}
			if name == "" || seen["dns:"+name] {
				continue
			}
			seen["dns:"+name] = true
			dnsNames = append(dnsNames, name)
		case acme.IdentifierIP:
			addr, err := netip.ParseAddr(id.Value)
			if err != nil || addr.Zone() != "" {
				return nil, nil, acme.New(acme.ProblemRejectedIdentifier, "%q is not an IP address", id.Value)
			}
			addr = addr.Unmap()
			if seen["ip:"+addr.String()] {
				continue
			}
			seen["ip:"+addr.String()] = true
			ips = append(ips, net.IP(addr.AsSlice()))
		default:
			return nil, nil, acme.New(acme.ProblemUnsupportedIdentifier, "identifier type %q cannot be put in a certificate", id.Type)
		}
	}
	return dnsNames, ips, nil
}

// validity is the profile's validity, or the order's requested one when the
// profile allows it. NotAfter is inclusive (RFC 5280 §4.1.2.5), so a 24-hour
// profile ends one second before NotBefore + 24h.
func validity(r Request, now time.Time) (time.Time, time.Time, error) {
	now = now.Truncate(time.Second)
	maxValidity := time.Duration(r.Profile.ValidityHours) * time.Hour
	if maxValidity <= 0 {
		return time.Time{}, time.Time{}, acme.Internal(fmt.Errorf("profiles.%s.validity_hours must be at least 1", r.ProfileName))
	}
	// The frontend holds a requested notBefore to the same bound.
	earliest := now.Add(-profile.MaxBackdate)
	notBefore := earliest
	var notAfter time.Time
	asked := r.Profile.AllowValidityRequest && r.NotBefore != nil
	if r.Profile.AllowValidityRequest {
		if asked {
			// Honoured exactly, even when the order waited and it is now
			// in the past: the client asked for this certificate.
			notBefore = r.NotBefore.Truncate(time.Second)
			if now.Sub(notBefore) > maxRequestedBackdate {
				return time.Time{}, time.Time{}, acme.Malformed("the requested notBefore %s is more than %s before this certificate is signed (%s): the CA does not backdate a certificate that far, and must not issue another notBefore than was asked for; place a new order and finalize it sooner, or leave notBefore out",
					notBefore.UTC().Format(time.RFC3339), maxRequestedBackdate, now.UTC().Format(time.RFC3339))
			}
		}
		if r.NotAfter != nil {
			notAfter = r.NotAfter.Truncate(time.Second)
			if !notAfter.After(now) {
				return time.Time{}, time.Time{}, acme.Malformed("the requested notAfter %s has passed (this certificate is signed at %s): the order waited too long to be finalized; place a new order", notAfter.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
			}
			// The backdate is a courtesy to relying parties with slow
			// clocks; it gives way to a requested notAfter the frontend
			// accepted (at most the profile's validity from when the order
			// was placed), rather than pushing the certificate over the
			// profile's validity and failing the order. It never moves
			// notBefore past the moment of signing.
			if lo := notAfter.Add(time.Second - maxValidity); !asked && lo.After(notBefore) && !lo.After(now) {
				notBefore = lo
			}
			if !notAfter.After(notBefore) {
				return time.Time{}, time.Time{}, acme.Malformed("the requested notAfter %s is not after notBefore %s", notAfter.Format(time.RFC3339), notBefore.Format(time.RFC3339))
			}
			if notAfter.Sub(notBefore) >= maxValidity {
				return time.Time{}, time.Time{}, acme.Malformed("the requested validity %s is longer than profile %q allows (%d hours)", notAfter.Sub(notBefore)+time.Second, r.ProfileName, r.Profile.ValidityHours)
			}
		}
	}
	if notAfter.IsZero() {
		notAfter = notBefore.Add(maxValidity - time.Second)
		if !notAfter.After(now) {
			// Only a requested notBefore can be this old.
			return time.Time{}, time.Time{}, acme.Malformed("a certificate from the requested notBefore %s for profile %q's %d hours would already have expired when signed (%s); place a new order and finalize it sooner, or leave notBefore out",
				notBefore.UTC().Format(time.RFC3339), r.ProfileName, r.Profile.ValidityHours, now.UTC().Format(time.RFC3339))
		}
	}
	return notBefore.UTC(), notAfter.UTC(), nil
}

// newSerial returns a positive 128-bit serial from crypto/rand whose first
// byte is non-zero and has its high bit clear, so it always encodes in exactly
// 16 DER bytes (no sign-padding byte, no stripped leading zero) and carries
// over 120 bits of entropy (CABF BR §7.1 asks for at least 64).
func newSerial() (*big.Int, error) {
	var b [16]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("reading random serial: %w", err)
		}
		b[0] &= 0x7f
		if b[0] != 0 {
			return new(big.Int).SetBytes(b[:]), nil
		}
	}
}
