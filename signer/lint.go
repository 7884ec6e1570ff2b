package signer

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	zx509 "github.com/zmap/zcrypto/x509"
	"github.com/zmap/zlint/v3"
	"github.com/zmap/zlint/v3/lint"

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

var (
	lintRegistryOnce sync.Once
	lintRegistryVal  lint.Registry
	lintRegistryErr  error
)

// lintRegistry is the filtered registry, built once: filtering walks every
// registered lint.
func lintRegistry() (lint.Registry, error) {
	lintRegistryOnce.Do(func() {
		var exclude []string
		names := lint.GlobalRegistry().Names()
		for name := range skippedLints {
			// A lint renamed or dropped by a zlint upgrade must not silently
			// widen or narrow what is skipped: fail loudly instead.
			if !slices.Contains(names, name) {
				lintRegistryErr = fmt.Errorf("zlint has no lint named %q; update signer.skippedLints for this zlint version", name)
				return
			}
			exclude = append(exclude, name)
		}
		lintRegistryVal, lintRegistryErr = lint.GlobalRegistry().Filter(lint.FilterOptions{
			IncludeSources: lintSources,
			ExcludeNames:   exclude,
		})
	})
	return lintRegistryVal, lintRegistryErr
}

// LintError is the Cause of the serverInternal error Issue and SignCRL return
// when zlint finds an Error or Fatal result: nothing was signed with the
// issuer's key.
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
	return &acme.Error{
		Problem: acme.Problem{Type: acme.ProblemServerInternal, Detail: what + " failed the CA's pre-signing checks and was not signed; the CA operator has been told"},
		Cause:   &LintError{Lints: failed},
	}
}

// lintIssuer is a stand-in for one real issuer: the same certificate with the
// public key swapped for a throwaway key of the same type and size. Signing
// with it yields the exact bytes the real key would sign (same issuer name,
// same AKI), so the lints see the real certificate without the real key
// being used on something that may be wrong (Boulder's linting issuer).
type lintIssuer struct {
	once sync.Once
	cert *x509.Certificate
	key  crypto.Signer
	err  error
}

// lintIssuers caches one lintIssuer per issuer certificate: generating an
// RSA key per issuance would cost more than the signature.
var lintIssuers sync.Map // string(issuer cert DER) → *lintIssuer

func (i *Issuer) linter() (*lintIssuer, error) {
	v, _ := lintIssuers.LoadOrStore(string(i.Cert.Raw), &lintIssuer{})
	li := v.(*lintIssuer)
	li.once.Do(func() {
		li.key, li.err = throwawayKey(i.Signer.Public())
		if li.err != nil {
			return
		}
		c := *i.Cert
		c.PublicKey = li.key.Public()
		li.cert = &c
	})
	return li, li.err
}

func throwawayKey(pub crypto.PublicKey) (crypto.Signer, error) {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		return ecdsa.GenerateKey(k.Curve, rand.Reader)
	case *rsa.PublicKey:
		return rsa.GenerateKey(rand.Reader, k.N.BitLen())
	case ed25519.PublicKey:
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		return priv, err
	}
	return nil, fmt.Errorf("no linting key for an issuer key of type %T", pub)
}

// lintCertificate signs tmpl for pub with the throwaway key and runs zlint.
func (i *Issuer) lintCertificate(tmpl *x509.Certificate, pub crypto.PublicKey) error {
	reg, err := lintRegistry()
	if err != nil {
		return acme.Internal(err)
	}
	li, err := i.linter()
	if err != nil {
		return acme.Internal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, li.cert, pub, li.key)
	if err != nil {
		return acme.Internal(fmt.Errorf("building the certificate to lint: %w", err))
	}
	zc, err := zx509.ParseCertificate(der)
	if err != nil {
		return acme.Internal(fmt.Errorf("parsing the certificate to lint: %w", err))
	}
	return lintFailure("the certificate", zlint.LintCertificateEx(zc, reg))
}

// lintCRL does the same for a CRL and returns the linted CRL, signed by
// the throwaway key: its tbsCertList is exactly what the issuer's key signs
// next (resignCRL), so a large CRL is encoded once, not twice.
func (i *Issuer) lintCRL(tmpl *x509.RevocationList) ([]byte, error) {
	reg, err := lintRegistry()
	if err != nil {
		return nil, acme.Internal(err)
	}
	li, err := i.linter()
	if err != nil {
		return nil, acme.Internal(err)
	}
	der, err := x509.CreateRevocationList(rand.Reader, tmpl, li.cert, li.key)
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
	return der, nil
}
