package worker

import (
	"context"
	"crypto/x509"
	"errors"
	"time"

	"github.com/hallmark-ca/hallmark/signer"
)

// Backend is a mounted signing backend as the signer_issue and
// signer_revoke handlers see it. A local or PKCS#11 issuer (a
// *signer.Issuer) is adapted to it here; the relay and custom backends
// (signer/relay, signer/custom) implement it themselves, as they hold no key.
type Backend interface {
	// Issue obtains the certificate for an order: r carries the order's
	// names and the profile, csr the order's CSR (DER) for backends that
	// forward it. A *acme.Error with a client problem type is the backend's
	// verdict on the request; an error wrapping signer.ErrUnavailable means
	// the attempt could not happen and the job is retried.
	Issue(ctx context.Context, r signer.Request, csr *x509.CertificateRequest) (*signer.Issued, error)
	// Revoke asks the backend to revoke a certificate it issued (RFC 5280
	// §5.3.1 reason code). Errors follow Issue's rules.
	Revoke(ctx context.Context, serial string, der []byte, reason int) error
	// IssuerID names the issuer in the certificate rows.
	IssuerID() string
}

// Checker is a backend that can tell whether it is reachable (a PKCS#11
// token, an upstream CA); the worker's /readyz asks it.
type Checker interface {
	Ready(ctx context.Context) error
}

// CRLSigner signs an issuer's CRLs, which the worker numbers, dates and
// stores (crl.go): a *signer.Issuer, or a custom backend with a crl hook.
type CRLSigner interface {
	SignCRL(number int64, thisUpdate, nextUpdate time.Time, entries []signer.RevokedEntry, idpURL string) ([]byte, error)
}

// selfCRLSigner is a backend that may sign its own CRLs; SignsCRLs says
// whether it is configured to.
type selfCRLSigner interface {
	CRLSigner
	SignsCRLs() bool
}

// errRevokeLocally is what the local adapter answers to Revoke: a local or
// PKCS#11 revocation is a row the worker signs into the CRL.
var errRevokeLocally = errors.New("a local or PKCS#11 issuer revokes by recording the revocation and signing a CRL")

// issuerBackend adapts a key-holding issuer.
type issuerBackend struct{ iss *signer.Issuer }

func (b issuerBackend) Issue(ctx context.Context, r signer.Request, _ *x509.CertificateRequest) (*signer.Issued, error) {
	return b.iss.Issue(ctx, r)
}

func (b issuerBackend) Revoke(context.Context, string, []byte, int) error { return errRevokeLocally }

func (b issuerBackend) IssuerID() string { return b.iss.ID }
