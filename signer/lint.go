package signer

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"

	zx509 "github.com/zmap/zcrypto/x509"
	"github.com/zmap/zlint/v3"
	"github.com/zmap/zlint/v3/lint"
	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// lintSources are the rule sets that apply to a private ACME CA issuing TLS
// certificates. Left out, on purpose:
//   - CABF_EV, CABF_SMIME_BR, CABF_CS_BR, ETSI_ESI: EV, S/MIME, code signing
//     and EU-qualified certificates, none of which Hallmark issues.
//   - Mozilla, Apple, Chrome: root-program policies bind CAs in those root
//     stores; a private root is in none. Their technical rules (key sizes,
//     encodings, validity) are also in the RFC and CABF BR lints kept here.
//   - RFC6962: Hallmark does not log to Certificate Transparency.
var lintSources = lint.SourceList{
	lint.RFC3279, lint.RFC5280, lint.RFC5480, lint.RFC5891, lint.RFC8813,
	lint.CABFBaselineRequirements, lint.Community,
}

// skippedLints are CABF BR lints that do not apply to a private CA, each with
// why. Everything else in lintSources that reports Error or Fatal stops
// issuance.
var skippedLints = map[string]string{
	// A private CA issues for the addresses it serves: 10/8, 192.168/16,
	// 127/8, fc00::/7. BR §7.1.2.7.12 forbids reserved IPs only for publicly
	// trusted certificates.
	"e_ext_san_contains_reserved_ip": "private CAs issue for private addresses",
	// Internal names (host.corp, svc.internal, localhost.lan) are the point
	// of a private CA; the BR rule exists because a public CA cannot prove
	// control of a name outside the public DNS.
	"e_dnsname_not_valid_tld": "private CAs issue for internal names",
	// CABF BR §7.1.2.7.9 requires a CABF policy OID (2.23.140.1.2.x) in
	// subscriber certificates. Those OIDs assert compliance with the BR as
	// audited under a public CA's CP/CPS, which a private CA must not claim,
	// and anyPolicy is forbidden there too; so no certificatePolicies at all.
	"e_sub_cert_certificate_policies_missing": "a private CA asserts no CABF policy OID",
	"e_sub_cert_cert_policy_empty":            "a private CA asserts no CABF policy OID",
	// Checks every certificate's signature against the keys of eight
	// compromised eMudhra public intermediates. A Hallmark issuer is never
	// one of them (NewIssuer ties the issuer to its own key), and the
	// check is an ECDSA P-384 verification per issuance: most of the lint
	// time, for nothing.
	"e_cert_issued_by_compromised_emudhra_ca": "a Hallmark issuer key is never an eMudhra key",
}

// namedRegistry is a zlint registry whose Names are listed once: zlint's
// Names sorts a fresh copy of every lint name, and LintCertificateEx calls
// it on every certificate only to size its result map, which cost more than
// a third of the lints themselves.
type namedRegistry struct {
	lint.Registry
	names []string
}

func (r namedRegistry) Names() []string { return r.names }

// lintRegistry is the filtered registry, built once: filtering walks every
// registered lint.
var lintRegistry = sync.OnceValues(func() (lint.Registry, error) { return buildRegistry("") })

// caLintConfig tells zlint that the CRL it reads covers CA certificates: a
// root's CRL of its intermediates may run 12 months (CABF BR §7.2, 4.9.7),
// not the 10 days of a CRL of leaves.
const caLintConfig = "[e_crl_next_update_invalid]\nSubscriberCRL = false\n"

// caLintRegistry is lintRegistry's lints configured for a root's CRL (SignARL).
var caLintRegistry = sync.OnceValues(func() (lint.Registry, error) { return buildRegistry(caLintConfig) })

// buildRegistry is the filtered registry with config (TOML; "" for none).
func buildRegistry(config string) (lint.Registry, error) {
	reg, err := filteredRegistry()
	if err != nil {
		return nil, err
	}
	if config != "" {
		cfg, err := lint.NewConfigFromString(config)
		if err != nil {
			return nil, err
		}
		reg.SetConfiguration(cfg)
	}
	return namedRegistry{Registry: reg, names: reg.Names()}, nil
}

// filteredRegistry is a new registry of lintSources' lints but skippedLints.
func filteredRegistry() (lint.Registry, error) {
	var exclude []string
	names := lint.GlobalRegistry().Names()
	for name := range skippedLints {
		// A lint renamed or dropped by a zlint upgrade must not silently
		// widen or narrow what is skipped: fail loudly instead.
		if !slices.Contains(names, name) {
			return nil, fmt.Errorf("zlint has no lint named %q; update signer.skippedLints for this zlint version", name)
		}
		exclude = append(exclude, name)
	}
	return lint.GlobalRegistry().Filter(lint.FilterOptions{
		IncludeSources: lintSources,
		ExcludeNames:   exclude,
	})
}

// LintError is the Cause of the error Issue and SignCRL return when zlint
// finds an Error or Fatal result (serverInternal; badCSR when only lints of
// the subscriber's key failed): nothing was signed with the issuer's key.
type LintError struct {
	// Lints maps each failed lint's name to its status and details.
	Lints map[string]string
}

func (e *LintError) Error() string {
	names := make([]string, 0, len(e.Lints))
	for n, d := range e.Lints {
		names = append(names, n+" ("+d+")")
	}
	sort.Strings(names)
	return "zlint refused it: " + strings.Join(names, "; ")
}

// Names are the failed lints, sorted.
func (e *LintError) Names() []string {
	names := make([]string, 0, len(e.Lints))
	for n := range e.Lints {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func lintFailure(what string, res *zlint.ResultSet) error {
	failed := map[string]string{}
	for name, r := range res.Results {
		if r.Status == lint.Error || r.Status == lint.Fatal {
			d := r.Status.String()
			if r.Details != "" {
				d += ": " + r.Details
			}
			failed[name] = d
		}
	}
	if len(failed) == 0 {
		return nil
	}
	le := &LintError{Lints: failed}
	if keyOnly(failed) {
		// Nothing the CA did: the subscriber's key is one anyone can work
		// out the private half of. The frontend refuses most such keys at
		// finalize (protocol/goodkey); what only the lint finds (an ECDSA
		// key with a tiny private scalar) fails the order as the CSR's
		// fault, which the client can act on, not as the CA's.
		return &acme.Error{
			Problem: acme.Problem{Type: acme.ProblemBadCSR, Detail: "the CSR's key is unsafe to certify, " + le.Error() + "; generate a new key"},
			Cause:   le,
		}
	}
	return &acme.Error{
		Problem: acme.Problem{Type: acme.ProblemServerInternal, Detail: what + " failed the CA's pre-signing checks and was not signed; the CA operator has been told"},
		Cause:   le,
	}
}

// subscriberKeyLints are the lints that judge the certificate's public
// key alone, which is the CSR's: their failure is the requester's key's.
var subscriberKeyLints = map[string]bool{
	"e_ecdsa_small_private_key":       true,
	"e_rsa_fermat_factorization":      true,
	"e_rsa_public_exponent_not_odd":   true,
	"e_rsa_public_exponent_too_small": true,
	"e_rsa_exp_negative":              true,
	"e_rsa_mod_less_than_2048_bits":   true,
}

func keyOnly(failed map[string]string) bool {
	for name := range failed {
		if !subscriberKeyLints[name] {
			return false
		}
	}
	return true
}

// The to-be-signed encoding is built once, for the issuer itself, and used
// twice: with a throwaway key's signature it is the copy that zlint reads;
// only if zlint passes it does the issuer's key sign it. So the certificate
// (or CRL) signed is by construction the one linted, with only the signature
// value different (Boulder's linting issuer, without building the encoding
// twice).

// errTBSCaught stops x509.CreateCertificate or x509.CreateRevocationList once
// it has handed tbsCatcher the encoding it would sign.
var errTBSCaught = errors.New("to-be-signed encoding caught")

// tbsCatcher is the signer given to x509.CreateCertificate and
// x509.CreateRevocationList to get the tbsCertificate or tbsCertList they
// would sign, without signing it: as a crypto.MessageSigner it is handed the
// whole encoding (crypto.SignMessage), keeps it and stops the call. Its public
// key is the issuer's, so the standard library checks and builds exactly what
// it would for the issuer's own key.
type tbsCatcher struct {
	pub crypto.PublicKey
	tbs []byte
}

func (c *tbsCatcher) Public() crypto.PublicKey { return c.pub }

func (c *tbsCatcher) SignMessage(_ io.Reader, msg []byte, _ crypto.SignerOpts) ([]byte, error) {
	c.tbs = msg
	return nil, errTBSCaught
}

// Sign is not called while crypto.SignMessage prefers SignMessage; if a Go
// release stopped preferring it, issuance fails instead of signing anything.
func (c *tbsCatcher) Sign(io.Reader, []byte, crypto.SignerOpts) ([]byte, error) {
	return nil, errors.New("the to-be-signed encoding was hashed before it could be caught")
}

// buildTBS runs create (a call of x509.CreateCertificate or
// x509.CreateRevocationList with the issuer's certificate as parent) with a
// tbsCatcher for the issuer's key and returns the encoding it would sign.
func (i *Issuer) buildTBS(create func(crypto.Signer) error) ([]byte, error) {
	c := &tbsCatcher{pub: i.Signer.Public()}
	err := create(c)
	if errors.Is(err, errTBSCaught) && c.tbs != nil {
		return c.tbs, nil
	}
	if err == nil {
		err = errors.New("the standard library signed without handing over its to-be-signed encoding")
	}
	return nil, err
}

// lintSignatures holds the signature value of the copies zlint reads: one
// per issuer key type, size and signature algorithm for the whole process,
// made by a throwaway key of that type and size. A throwaway key's signature
// never verified against the issuer named in the copy, fresh or not; what
// zlint may read of it is its encoding and length (the CABF ECDSA encoding
// lints tell the curve by the length), and this real signature has those. A
// fresh one per certificate would tell zlint nothing more, for a signature
// per issuance: about a millisecond for an RSA-2048 issuer.
var lintSignatures sync.Map // "ecdsa P-256 ECDSA-SHA256", ... → *lintSignature

type lintSignature struct {
	once sync.Once
	sig  []byte
	err  error
}

func lintSignatureFor(pub crypto.PublicKey, sigAlg x509.SignatureAlgorithm) ([]byte, error) {
	h, err := signatureHash(sigAlg)
	if err != nil {
		return nil, err
	}
	var kind string
	var generate func() (crypto.Signer, error)
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		kind = "ecdsa " + k.Curve.Params().Name
		generate = func() (crypto.Signer, error) { return ecdsa.GenerateKey(k.Curve, rand.Reader) }
	case *rsa.PublicKey:
		kind = fmt.Sprintf("rsa %d", k.N.BitLen())
		generate = func() (crypto.Signer, error) { return rsa.GenerateKey(rand.Reader, k.N.BitLen()) }
	default:
		return nil, fmt.Errorf("no linting key for an issuer key of type %T", pub)
	}
	v, _ := lintSignatures.LoadOrStore(kind+" "+sigAlg.String(), &lintSignature{})
	ls := v.(*lintSignature)
	ls.once.Do(func() {
		key, err := generate()
		if err != nil {
			ls.err = err
			return
		}
		ls.sig, ls.err = crypto.SignMessage(key, rand.Reader, []byte("a certificate or CRL for zlint to read"), h)
	})
	return ls.sig, ls.err
}

// lintCopy is tbs with the signature of the issuer's key type and size.
func (i *Issuer) lintCopy(tbs []byte, sigAlg x509.SignatureAlgorithm) ([]byte, error) {
	sig, err := lintSignatureFor(i.Signer.Public(), sigAlg)
	if err != nil {
		return nil, err
	}
	return assembleSigned(tbs, sig)
}

// lintCertificate builds the certificate tmpl describes for pub, issued by
// i, lints it and returns its tbsCertificate: what the issuer's key may sign.
func (i *Issuer) lintCertificate(tmpl *x509.Certificate, pub crypto.PublicKey) ([]byte, error) {
	reg, err := lintRegistry()
	if err != nil {
		return nil, acme.Internal(err)
	}
	tbs, err := i.buildTBS(func(c crypto.Signer) error {
		_, err := x509.CreateCertificate(rand.Reader, tmpl, i.Cert, pub, c)
		return err
	})
	if err != nil {
		return nil, acme.Internal(fmt.Errorf("building the certificate: %w", err))
	}
	der, err := i.lintCopy(tbs, tmpl.SignatureAlgorithm)
	if err != nil {
		return nil, acme.Internal(fmt.Errorf("building the certificate to lint: %w", err))
	}
	zc, err := zx509.ParseCertificate(der)
	if err != nil {
		return nil, acme.Internal(fmt.Errorf("parsing the certificate to lint: %w", err))
	}
	if err := lintFailure("the certificate", zlint.LintCertificateEx(zc, reg)); err != nil {
		return nil, err
	}
	return tbs, nil
}

// lintCRL does the same for a CRL and returns its tbsCertList: a large CRL
// is encoded once, not twice.
func (i *Issuer) lintCRL(tmpl *x509.RevocationList, registry func() (lint.Registry, error)) ([]byte, error) {
	reg, err := registry()
	if err != nil {
		return nil, acme.Internal(err)
	}
	tbs, err := i.buildTBS(func(c crypto.Signer) error {
		_, err := x509.CreateRevocationList(rand.Reader, tmpl, i.Cert, c)
		return err
	})
	if err != nil {
		return nil, acme.Internal(fmt.Errorf("building the CRL: %w", err))
	}
	der, err := i.lintCopy(tbs, tmpl.SignatureAlgorithm)
	if err != nil {
		return nil, acme.Internal(fmt.Errorf("building the CRL to lint: %w", err))
	}
	zr, err := zx509.ParseRevocationList(der)
	if err != nil {
		return nil, acme.Internal(fmt.Errorf("parsing the CRL to lint: %w", err))
	}
	if err := lintFailure("the CRL", zlint.LintRevocationListEx(zr, reg)); err != nil {
		return nil, err
	}
	return tbs, nil
}

// signLinted signs tbs, which lintCertificate or lintCRL passed, with the
// issuer's key, as x509.CreateCertificate would: crypto.SignMessage, then
// the signature checked against the issuer certificate so that a faulty
// signer (an HSM, a remote key) never yields a certificate that does not
// verify.
func (i *Issuer) signLinted(tbs []byte, sigAlg x509.SignatureAlgorithm) ([]byte, error) {
	h, err := signatureHash(sigAlg)
	if err != nil {
		return nil, err
	}
	sig, err := crypto.SignMessage(i.Signer, rand.Reader, tbs, h)
	if err != nil {
		return nil, err
	}
	if err := i.Cert.CheckSignature(sigAlg, tbs, sig); err != nil {
		return nil, fmt.Errorf("the issuer key's signature does not verify with the issuer certificate: %w", err)
	}
	return assembleSigned(tbs, sig)
}

// signatureHash is the digest of the algorithms signatureAlgorithm chooses.
func signatureHash(sigAlg x509.SignatureAlgorithm) (crypto.Hash, error) {
	switch sigAlg {
	case x509.SHA256WithRSA, x509.ECDSAWithSHA256:
		return crypto.SHA256, nil
	case x509.ECDSAWithSHA384:
		return crypto.SHA384, nil
	}
	return 0, fmt.Errorf("no digest for signature algorithm %s", sigAlg)
}

// assembleSigned wraps a tbsCertificate or tbsCertList and its signature as
// RFC 5280 §4.1 and §5.1 do: SEQUENCE { tbs, signatureAlgorithm, BIT STRING }.
// The outer signatureAlgorithm must equal the one inside tbs (§4.1.1.2,
// §5.1.1.2), so it is copied from there: the field after the optional
// version ([0] in a certificate, an INTEGER in a CRL) and, in a certificate,
// the serialNumber INTEGER.
func assembleSigned(tbs, sig []byte) ([]byte, error) {
	var body, alg cryptobyte.String
	in := cryptobyte.String(tbs)
	if !in.ReadASN1(&body, cbasn1.SEQUENCE) || !in.Empty() ||
		!body.SkipOptionalASN1(cbasn1.Tag(0).Constructed().ContextSpecific()) ||
		!body.SkipOptionalASN1(cbasn1.INTEGER) ||
		!body.ReadASN1Element(&alg, cbasn1.SEQUENCE) {
		return nil, errors.New("the to-be-signed encoding has no signature algorithm where RFC 5280 puts it")
	}
	var b cryptobyte.Builder
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddBytes(tbs)
		b.AddBytes(alg)
		b.AddASN1BitString(sig)
	})
	return b.Bytes()
}
