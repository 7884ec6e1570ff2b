package signer

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// The files of a local CA directory.
const (
	RootCertFile         = "root.pem"
	RootKeyFile          = "root.key"
	IntermediateCertFile = "intermediate.pem"
	IntermediateKeyFile  = "intermediate.key"
)

// ErrExists is returned by InitLocal when the directory already holds a CA
// file: a re-run of `ca init` never replaces keys that certificates chain to.
var ErrExists = errors.New("a local CA file already exists; refusing to overwrite it")

// Validity of the development CA's certificates; IntermediateValidity is
// an HSM intermediate's too (pkcs11.Init).
const (
	rootValidity         = 10 * 365 * 24 * time.Hour
	IntermediateValidity = 5 * 365 * 24 * time.Hour
)

// InitLocal creates, in dir, a root CA (ECDSA P-384, 10 years) and an
// intermediate signed by it (ECDSA P-256, 5 years; P-256 signs fastest and
// is what every TLS client supports), writing root.pem, root.key (0600),
// intermediate.pem and intermediate.key (0600). commonName prefixes the
// names: "<commonName> Root CA" and "<commonName> Intermediate CA".
//
// It refuses to overwrite: if any of the four files exists it writes nothing
// and returns an error wrapping ErrExists, so `ca init` is safe to re-run. It
// returns the root certificate's path, for the operator to install as a
// trust anchor.
func InitLocal(dir, commonName string) (rootPath string, err error) {
	if commonName == "" {
		commonName = "Hallmark"
	}
	files := []string{RootCertFile, RootKeyFile, IntermediateCertFile, IntermediateKeyFile}
	for _, f := range files {
		if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
			return "", fmt.Errorf("initialising local CA in %s: %s: %w", dir, f, ErrExists)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("initialising local CA in %s: %w", dir, err)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("initialising local CA: %w", err)
	}

	now := time.Now().Truncate(time.Second).UTC()
	rootKey, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		return "", err
	}
	interKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	rootTmpl, err := caTemplate(commonName+" Root CA", []string{commonName}, rootKey.Public(), now, now.Add(rootValidity))
	if err != nil {
		return "", err
	}
	rootTmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	rootDER, err := x509.CreateCertificate(rand.Reader, rootTmpl, rootTmpl, rootKey.Public(), rootKey)
	if err != nil {
		return "", fmt.Errorf("signing root certificate: %w", err)
	}
	root, err := x509.ParseCertificate(rootDER)
	if err != nil {
		return "", err
	}
	interTmpl, err := IntermediateTemplate(commonName+" Intermediate CA", []string{commonName}, interKey.Public(), now, now.Add(IntermediateValidity))
	if err != nil {
		return "", err
	}
	interDER, err := x509.CreateCertificate(rand.Reader, interTmpl, root, interKey.Public(), rootKey)
	if err != nil {
		return "", fmt.Errorf("signing intermediate certificate: %w", err)
	}

	rootKeyDER, err := x509.MarshalPKCS8PrivateKey(rootKey)
	if err != nil {
		return "", err
	}
	interKeyDER, err := x509.MarshalPKCS8PrivateKey(interKey)
	if err != nil {
		return "", err
	}
	// Keys first: a crash between files leaves a directory that the next
	// run refuses (ErrExists) rather than a certificate without its key
	// silently replaced.
	writes := []struct {
		name, typ string
		der       []byte
		mode      os.FileMode
	}{
		{RootKeyFile, "PRIVATE KEY", rootKeyDER, 0o600},
		{IntermediateKeyFile, "PRIVATE KEY", interKeyDER, 0o600},
		{RootCertFile, "CERTIFICATE", rootDER, 0o644},
		{IntermediateCertFile, "CERTIFICATE", interDER, 0o644},
	}
	for _, w := range writes {
		if err := WriteNew(filepath.Join(dir, w.name), w.mode, &pem.Block{Type: w.typ, Bytes: w.der}); err != nil {
			return "", fmt.Errorf("initialising local CA in %s: %w", dir, err)
		}
	}
	return filepath.Join(dir, RootCertFile), nil
}

// IntermediateTemplate is the certificate of an issuing CA named cn: it
// signs only leaves (pathLen 0) and, as CABF BR §7.1.2.10.6 asks of
// subordinate CAs, carries the EKUs its leaves use.
func IntermediateTemplate(cn string, org []string, pub crypto.PublicKey, notBefore, notAfter time.Time) (*x509.Certificate, error) {
	t, err := caTemplate(cn, org, pub, notBefore, notAfter)
	if err != nil {
		return nil, err
	}
	t.MaxPathLen, t.MaxPathLenZero = 0, true
	t.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	t.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	return t, nil
}

func caTemplate(cn string, org []string, pub crypto.PublicKey, notBefore, notAfter time.Time) (*x509.Certificate, error) {
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	skid, err := SubjectKeyID(pub)
	if err != nil {
		return nil, err
	}
	return &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn, Organization: org},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		BasicConstraintsValid: true,
		IsCA:                  true,
		SubjectKeyId:          skid,
	}, nil
}

// WriteNew creates path (O_EXCL: never replaces a file) with mode and
// writes the PEM block.
func WriteNew(path string, mode os.FileMode, b *pem.Block) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s: %w", filepath.Base(path), ErrExists)
		}
		return err
	}
	if err := pem.Encode(f, b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// LoadLocal loads the local CA in dir: intermediate.key (PKCS #8, SEC 1 or
// PKCS #1 PEM), intermediate.pem (the intermediate first, then any further
// intermediates) and root.pem. It checks that the key matches the
// intermediate and that the chain verifies to the root.
func LoadLocal(dir string) (*Issuer, error) {
	chain, err := ReadCertificates(filepath.Join(dir, IntermediateCertFile))
	if err != nil {
		return nil, fmt.Errorf("loading local CA: %w", err)
	}
	roots, err := ReadCertificates(filepath.Join(dir, RootCertFile))
	if err != nil {
		return nil, fmt.Errorf("loading local CA: %w", err)
	}
	key, err := ReadKey(filepath.Join(dir, IntermediateKeyFile))
	if err != nil {
		return nil, fmt.Errorf("loading local CA: %w", err)
	}
	rootPool := x509.NewCertPool()
	for _, r := range roots {
		rootPool.AddCert(r)
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if _, err := chain[0].Verify(x509.VerifyOptions{
		Roots: rootPool, Intermediates: inter,
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
		CurrentTime: chain[0].NotBefore.Add(time.Second),
	}); err != nil {
		return nil, fmt.Errorf("loading local CA from %s: %s does not chain to %s: %w", dir, IntermediateCertFile, RootCertFile, err)
	}
	iss, err := NewIssuer(chain[0], chain, key)
	if err != nil {
		return nil, fmt.Errorf("loading local CA from %s: %w", dir, err)
	}
	if err := iss.loadCross(dir, filepath.Join(dir, CrossIntermediate)); err != nil {
		return nil, fmt.Errorf("loading local CA from %s: %w", dir, err)
	}
	return iss, nil
}

// ReadCertificates reads every CERTIFICATE block of a PEM file, in order.
func ReadCertificates(path string) ([]*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no PEM CERTIFICATE block", path)
	}
	return out, nil
}

// ReadKey reads a PEM private key (PKCS#8, SEC 1 EC or PKCS#1 RSA) that can sign.
func ReadKey(path string) (crypto.Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, fmt.Errorf("%s: no PEM block", path)
	}
	var key any
	switch b.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(b.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	default:
		return nil, fmt.Errorf("%s: PEM block %q is not a private key", path, b.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: key of type %T cannot sign", path, key)
	}
	return s, nil
}
