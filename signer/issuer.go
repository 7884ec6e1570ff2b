package signer

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
)

// Issuer is one issuing CA: its certificate, its chain up to (not including)
// the root, and the crypto.Signer that holds its key.
type Issuer struct {
	// ID is stable: the hex of the issuer certificate's SubjectKeyId. CRL URLs
	// and store rows name the issuer by it.
	ID   string
	Cert *x509.Certificate
	// Chain is what is sent after the leaf: the issuer itself first, then any
	// further intermediates, never the root.
	Chain []*x509.Certificate
	// AltChains are other chains of the same key (a cross-signed
	// intermediate, a chain to a new root), each sent instead of Chain to
	// a client that asks (RFC 8555 §7.4.2).
	AltChains [][]*x509.Certificate
	Signer    crypto.Signer
	// Logger receives the audit lines before and after every signature and
	// every lint failure. Nil means slog.Default().
	Logger *slog.Logger
}

// NewIssuer checks that signer holds the key of cert and that cert may sign
// certificates and CRLs, and returns the Issuer. chain may be empty, in which
// case it is just cert; if it is not, its first element must be cert. Every
// backend (key file, PKCS#11, ...) builds its Issuer through here, so a
// mismatched key and certificate is caught at start-up, not at the first order.
func NewIssuer(cert *x509.Certificate, chain []*x509.Certificate, s crypto.Signer) (*Issuer, error) {
	if cert == nil || s == nil {
		return nil, errors.New("building issuer: a certificate and a signer are both required")
	}
	if len(chain) == 0 {
		chain = []*x509.Certificate{cert}
	}
	if !chain[0].Equal(cert) {
		return nil, fmt.Errorf("building issuer %q: the chain must start with the issuer certificate itself", cert.Subject.CommonName)
	}
	if !publicKeysEqual(cert.PublicKey, s.Public()) {
		return nil, fmt.Errorf("building issuer %q: the signing key does not match the certificate's public key; check that the key file or token label belongs to this certificate", cert.Subject.CommonName)
	}
	if !cert.IsCA || !cert.BasicConstraintsValid {
		return nil, fmt.Errorf("building issuer %q: the certificate is not a CA certificate (basicConstraints cA is not set)", cert.Subject.CommonName)
	}
	if cert.KeyUsage&x509.KeyUsageCertSign == 0 || cert.KeyUsage&x509.KeyUsageCRLSign == 0 {
		return nil, fmt.Errorf("building issuer %q: the certificate's key usage must include keyCertSign and cRLSign", cert.Subject.CommonName)
	}
	if _, err := signatureAlgorithm(s.Public()); err != nil {
		return nil, fmt.Errorf("building issuer %q: %w", cert.Subject.CommonName, err)
	}
	id := hex.EncodeToString(cert.SubjectKeyId)
	if len(cert.SubjectKeyId) == 0 {
		// CreateRevocationList needs the issuer's SKI for the CRL's AKI, and
		// RFC 5280 §4.2.1.2 requires it in CA certificates.
		return nil, fmt.Errorf("building issuer %q: the certificate has no subjectKeyIdentifier (RFC 5280 §4.2.1.2 requires one in CA certificates)", cert.Subject.CommonName)
	}
	return &Issuer{ID: id, Cert: cert, Chain: chain, Signer: s}, nil
}

func (i *Issuer) logger() *slog.Logger {
	if i.Logger != nil {
		return i.Logger
	}
	return slog.Default()
}

// signatureAlgorithm chooses the signature algorithm from the issuing key, so
// any crypto.Signer works: SHA-256 with RSA (PKCS #1 v1.5), and ECDSA with the
// hash that matches the curve (RFC 5480 §4, CABF BR §7.1.3.2).
func signatureAlgorithm(pub crypto.PublicKey) (x509.SignatureAlgorithm, error) {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return 0, fmt.Errorf("RSA issuing key of %d bits is too short; 2048 bits is the minimum", k.N.BitLen())
		}
		return x509.SHA256WithRSA, nil
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return x509.ECDSAWithSHA256, nil
		case elliptic.P384():
			return x509.ECDSAWithSHA384, nil
		}
		return 0, fmt.Errorf("ECDSA issuing key on curve %s is not supported; use P-256 or P-384", k.Curve.Params().Name)
	}
	return 0, fmt.Errorf("issuing key of type %T is not supported; use RSA or ECDSA P-256/P-384", pub)
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	ak, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && ak.Equal(b)
}

// SubjectKeyID is RFC 7093 §2 method 1: the leftmost 160 bits of the SHA-256
// of the subjectPublicKey BIT STRING. (Go fills SubjectKeyId only for CA
// certificates, so leaves get theirs here.)
func SubjectKeyID(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	var spki struct {
		Algorithm pkix.AlgorithmIdentifier
		PublicKey asn1.BitString
	}
	if _, err := asn1.Unmarshal(der, &spki); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(spki.PublicKey.Bytes)
	return sum[:20], nil
}
