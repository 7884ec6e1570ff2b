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

// CAOptions are what the CA certificates Hallmark makes say besides their
// keys and validity.
type CAOptions struct {
	// Name prefixes the common names ("<Name> Root CA", "<Name>
	// Intermediate CA") and is the organization; default "Hallmark".
	Name string
	// Country is a new root's subject countryName (ISO 3166-1 alpha-2;
	// CABF BR §7.1.2.10.2 requires one in every CA certificate), which its
	// intermediates repeat; default "XX", the user-assigned code for no
	// country in particular (ca.country).
	Country string
	// URLBase is ca.url_base: a root's CRL is published at
	// URLBase/crl/<root id>, and each intermediate names it (RootCRLURL).
	URLBase string
}

func (o CAOptions) withDefaults() (CAOptions, error) {
	if o.Name == "" {
		o.Name = "Hallmark"
	}
	if o.Country == "" {
		o.Country = "XX"
	}
	if o.URLBase == "" {
		return o, errors.New("the CA's URL base (ca.url_base) is empty: an intermediate must name where its root's CRL is")
	}
	return o, nil
}

// InitLocal creates, in dir, a root CA (ECDSA P-384, 10 years) and an
// intermediate signed by it (ECDSA P-256, 5 years; P-256 signs fastest and
// is what every TLS client supports), writing root.pem, root.key (0600),
// intermediate.pem and intermediate.key (0600), and the root's CRL
// (root.crl, SignRootCRL). o names them: "<Name> Root CA" and "<Name>
// Intermediate CA".
//
// It refuses to overwrite: if any of the four files exists it writes nothing
// and returns an error wrapping ErrExists, so `ca init` is safe to re-run. It
// returns the root certificate's path, for the operator to install as a
// trust anchor.
func InitLocal(dir string, o CAOptions) (rootPath string, err error) {
	o, err = o.withDefaults()
	if err != nil {
		return "", err
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
	root, rootKey, err := newRoot(o.Name+" Root CA", o, now)
	if err != nil {
		return "", err
	}
	interKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	interTmpl, err := IntermediateTemplate(subordinateName(o.Name+" Intermediate CA", root.Subject, o.Country), interKey.Public(), now, now.Add(IntermediateValidity), RootCRLURL(o.URLBase, root))
	if err != nil {
		return "", err
	}
	inter, err := SignCA(root, rootKey, interTmpl, interKey.Public())
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
		{RootCertFile, "CERTIFICATE", root.Raw, 0o644},
		{IntermediateCertFile, "CERTIFICATE", inter.Raw, 0o644},
	}
	for _, w := range writes {
		if err := WriteNew(filepath.Join(dir, w.name), w.mode, &pem.Block{Type: w.typ, Bytes: w.der}); err != nil {
			return "", fmt.Errorf("initialising local CA in %s: %w", dir, err)
		}
	}
	if _, err := SignRootCRL(dir, RootCertFile, RootKeyFile, o.URLBase); err != nil {
		return "", err
	}
	return filepath.Join(dir, RootCertFile), nil
}

// newRoot makes a self-signed root CA named cn (ECDSA P-384, 10 years),
// linted before it is returned.
func newRoot(cn string, o CAOptions, now time.Time) (*x509.Certificate, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl, err := caTemplate(pkix.Name{CommonName: cn, Organization: []string{o.Name}, Country: []string{o.Country}}, key.Public(), now, now.Add(rootValidity))
	if err != nil {
		return nil, nil, err
	}
	// A root signs CA certificates and CRLs only; CABF BR §7.1.2.1 gives it
	// no pathLen, no EKU and no certificatePolicies.
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing root certificate %s: %w", cn, err)
	}
	if err := LintCACertificate(der); err != nil {
		return nil, nil, fmt.Errorf("root certificate %s: %w", cn, err)
	}
	root, err := x509.ParseCertificate(der)
	return root, key, err
}

// subordinateName is an intermediate's subject under a root whose subject
// is parent: the root's organization and country (or country when the
// root has none, as roots made before Hallmark wrote one).
func subordinateName(cn string, parent pkix.Name, country string) pkix.Name {
	n := pkix.Name{CommonName: cn, Organization: parent.Organization, Country: parent.Country}
	if len(n.Country) == 0 {
		n.Country = []string{country}
	}
	return n
}

// oidAnyPolicy is anyPolicy (RFC 5280 §4.2.1.4).
var oidAnyPolicy = func() x509.OID {
	oid, err := x509.OIDFromInts([]uint64{2, 5, 29, 32, 0})
	if err != nil {
		panic(err)
	}
	return oid
}()

// IntermediateTemplate is the certificate of an issuing CA named subject:
// it signs only leaves (pathLen 0) and, as CABF BR §7.1.2.10.6 asks of
// subordinate CAs, carries the EKUs its leaves use. Its cRLDistributionPoints
// is rootCRL, where its root publishes whether it is revoked (BR
// §7.1.2.10.2 requires one). Its certificatePolicies is anyPolicy alone: the
// "no policy restrictions" form BR §7.1.2.10.5 allows a subordinate CA
// operated by its root's own operator (an Affiliate), which a Hallmark
// intermediate always is. A CABF reserved OID (2.23.140.1.2.x) would assert
// issuance audited under the Baseline Requirements, which a private CA does
// not claim (its leaves carry no policy either: skippedLints).
func IntermediateTemplate(subject pkix.Name, pub crypto.PublicKey, notBefore, notAfter time.Time, rootCRL string) (*x509.Certificate, error) {
	if rootCRL == "" {
		return nil, errors.New("an intermediate needs its root's CRL URL (ca.url_base)")
	}
	t, err := caTemplate(subject, pub, notBefore, notAfter)
	if err != nil {
		return nil, err
	}
	t.MaxPathLen, t.MaxPathLenZero = 0, true
	t.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	t.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	t.CRLDistributionPoints = []string{rootCRL}
	t.Policies = []x509.OID{oidAnyPolicy}
	return t, nil
}

func caTemplate(subject pkix.Name, pub crypto.PublicKey, notBefore, notAfter time.Time) (*x509.Certificate, error) {
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
		Subject:               subject,
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
		CurrentTime: chainTime(chain, roots),
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
