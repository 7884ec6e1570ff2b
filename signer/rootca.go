package signer

import (
	"crypto"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"time"

	zx509 "github.com/zmap/zcrypto/x509"
	"github.com/zmap/zlint/v3"
)

// A root's CRL (an ARL: it lists the CA certificates the root revoked) is
// signed whenever the root's key is used (`ca init`, `ca init --cross-root`,
// `ca intermediate`) and by `hallmark-worker ca root-crl`, written beside
// the root in ca.dir, and published in the database by hallmark-worker,
// from which the frontend serves it at ca.url_base/crl/<root id>: the URL
// every intermediate names. Nothing else holds the root's key, so nothing
// else renews it: the operator runs `ca root-crl` before its nextUpdate.
const (
	RootCRLFile      = "root.crl"    // the CRL of root.pem, DER
	CrossRootCRLFile = "root-x2.crl" // the CRL of root-x2.pem, DER
	// ARLValidity is how long a root's CRL is valid: CABF BR §7.2 (4.9.7)
	// allows a CRL of CA certificates 12 months.
	ARLValidity = 365 * 24 * time.Hour
)

// rootFile is one of ca.dir's roots: its certificate, key and CRL files.
type rootFile struct{ cert, key, crl string }

// rootFiles are ca.dir's roots: root.pem always, root-x2.pem once `ca init
// --cross-root` made it.
var rootFiles = []rootFile{{RootCertFile, RootKeyFile, RootCRLFile}, {CrossRootCertFile, CrossRootKeyFile, CrossRootCRLFile}}

// RootCertFiles are the certificate files of ca.dir's roots.
func RootCertFiles() []string {
	out := make([]string, len(rootFiles))
	for i, f := range rootFiles {
		out[i] = f.cert
	}
	return out
}

// RootCRLURL is where root's CRL is published: what its intermediates'
// cRLDistributionPoints and the CRL's issuingDistributionPoint say.
func RootCRLURL(urlBase string, root *x509.Certificate) string {
	return urlBase + "/crl/" + hex.EncodeToString(root.SubjectKeyId)
}

// SignCA has root's key sign tmpl for pub, a CA certificate, once zlint
// passes it (built for the root, signed by a throwaway key, as every leaf is).
func SignCA(root *x509.Certificate, rootKey crypto.Signer, tmpl *x509.Certificate, pub crypto.PublicKey) (*x509.Certificate, error) {
	ri, err := NewIssuer(root, nil, rootKey)
	if err != nil {
		return nil, err
	}
	if tmpl.SignatureAlgorithm, err = signatureAlgorithm(rootKey.Public()); err != nil {
		return nil, err
	}
	tbs, err := ri.lintCertificate(tmpl, pub)
	if err != nil {
		return nil, lintCause(err)
	}
	der, err := ri.signLinted(tbs, tmpl.SignatureAlgorithm)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

// lintCause is a lint refusal's LintError, which names the lints, rather
// than the ACME problem issuance shows a client.
func lintCause(err error) error {
	var le *LintError
	if errors.As(err, &le) {
		return le
	}
	return err
}

// LintCACertificate lints a CA certificate already signed (a self-signed
// root, which no other key signs first): nil when zlint finds no error.
func LintCACertificate(der []byte) error {
	reg, err := lintRegistry()
	if err != nil {
		return err
	}
	zc, err := zx509.ParseCertificate(der)
	if err != nil {
		return err
	}
	return lintCause(lintFailure("the CA certificate", zlint.LintCertificateEx(zc, reg)))
}

// RootCRL is a root's signed CRL as the worker publishes it.
type RootCRL struct {
	IssuerID   string // the root's id: hex of its subjectKeyIdentifier
	Number     int64
	ThisUpdate time.Time
	NextUpdate time.Time
	DER        []byte
}

// SignRootCRL signs the CRL of the root in dir/certFile with its key in
// dir/keyFile and writes it to the root's CRL file, replacing the one
// there: the same entries (none until an intermediate is revoked), a
// higher number, valid ARLValidity from now.
func SignRootCRL(dir, certFile, keyFile, urlBase string) (*RootCRL, error) {
	i := slices.IndexFunc(rootFiles, func(f rootFile) bool { return f.cert == certFile })
	if i < 0 {
		return nil, fmt.Errorf("%s is not a root of ca.dir", certFile)
	}
	crlFile := rootFiles[i].crl
	root, key, err := rootOf(dir, certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("signing the root's CRL: %w", err)
	}
	ri, err := NewIssuer(root, nil, key)
	if err != nil {
		return nil, err
	}
	now := time.Now().Truncate(time.Second).UTC()
	// Numbered by time, so a CRL signed on another copy of ca.dir is
	// numbered above the stored one too; above the last one in any case.
	number := now.UnixNano()
	var entries []RevokedEntry
	if prev, err := readRootCRL(filepath.Join(dir, crlFile), root); err == nil {
		number = max(number, prev.Number.Int64()+1)
		for _, e := range prev.RevokedCertificateEntries {
			entries = append(entries, RevokedEntry{Serial: e.SerialNumber, RevokedAt: e.RevocationTime, Reason: e.ReasonCode})
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading the root's last CRL, whose entries the next one keeps: %w", err)
	}
	der, err := ri.SignARL(number, now, now.Add(ARLValidity), entries, RootCRLURL(urlBase, root))
	if err != nil {
		return nil, lintCause(err)
	}
	if err := writeReplacing(filepath.Join(dir, crlFile), der); err != nil {
		return nil, err
	}
	return &RootCRL{IssuerID: ri.ID, Number: number, ThisUpdate: now, NextUpdate: now.Add(ARLValidity), DER: der}, nil
}

// RefreshRootCRLs signs the CRL of each root in dir (root.pem, and
// root-x2.pem when there is one) again: `hallmark-worker ca root-crl`.
func RefreshRootCRLs(dir, urlBase string) ([]*RootCRL, error) {
	var out []*RootCRL
	for _, f := range rootFiles {
		if f.cert == CrossRootCertFile {
			if _, err := os.Stat(filepath.Join(dir, f.key)); errors.Is(err, fs.ErrNotExist) {
				continue
			}
		}
		c, err := SignRootCRL(dir, f.cert, f.key, urlBase)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// RootCRLs reads the CRL files of dir's roots, each checked against its
// root's signature, for the worker to publish; a root without one has none.
func RootCRLs(dir string) ([]*RootCRL, error) {
	var out []*RootCRL
	for _, f := range rootFiles {
		if _, err := os.Stat(filepath.Join(dir, f.crl)); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		roots, err := ReadCertificates(filepath.Join(dir, f.cert))
		if err != nil {
			return nil, err
		}
		rl, err := readRootCRL(filepath.Join(dir, f.crl), roots[0])
		if err != nil {
			return nil, err
		}
		out = append(out, &RootCRL{IssuerID: hex.EncodeToString(roots[0].SubjectKeyId), Number: rl.Number.Int64(),
			ThisUpdate: rl.ThisUpdate, NextUpdate: rl.NextUpdate, DER: rl.Raw})
	}
	return out, nil
}

// readRootCRL reads a DER CRL that root signed.
func readRootCRL(path string, root *x509.Certificate) (*x509.RevocationList, error) {
	der, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	rl, err := x509.ParseRevocationList(der)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := rl.CheckSignatureFrom(root); err != nil {
		return nil, fmt.Errorf("%s is not signed by %s: %w", path, root.Subject.CommonName, err)
	}
	if rl.Number == nil || !rl.Number.IsInt64() || rl.Number.Cmp(big.NewInt(0)) < 0 {
		return nil, fmt.Errorf("%s: its CRL number is missing or out of range", path)
	}
	return rl, nil
}

// writeReplacing writes data to path through a temporary file renamed over
// it, so a reader never sees half a file.
func writeReplacing(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
