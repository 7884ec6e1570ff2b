package signer

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// The files of a second root that cross-signs intermediates (InitCrossRoot),
// and the directory of the intermediates made after `ca init`
// (CreateIntermediate), each named by its issuer ID.
const (
	CrossRootCertFile  = "root-x2.pem"
	CrossRootKeyFile   = "root-x2.key"
	CrossIntermediate  = "intermediate-x2.pem" // the intermediate of `ca init`, signed by the cross root
	IntermediatesDir   = "issuers"
	crossSuffix        = ".x2.pem"
	intermediateSuffix = ".pem"
	keySuffix          = ".key"
)

// KeyTypes are the issuing key types an intermediate may be made with.
var KeyTypes = []string{"p256", "p384", "rsa2048", "rsa3072", "rsa4096"}

// GenerateKey makes a key of one of KeyTypes.
func GenerateKey(keyType string) (crypto.Signer, error) {
	switch keyType {
	case "p256":
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "p384":
		return ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "rsa2048":
		return rsa.GenerateKey(rand.Reader, 2048)
	case "rsa3072":
		return rsa.GenerateKey(rand.Reader, 3072)
	case "rsa4096":
		return rsa.GenerateKey(rand.Reader, 4096)
	}
	return nil, fmt.Errorf("key type %q is not one of %v", keyType, KeyTypes)
}

// rootOf reads a root's certificate and key from dir.
func rootOf(dir, certFile, keyFile string) (*x509.Certificate, crypto.Signer, error) {
	certs, err := ReadCertificates(filepath.Join(dir, certFile))
	if err != nil {
		return nil, nil, err
	}
	key, err := ReadKey(filepath.Join(dir, keyFile))
	if err != nil {
		return nil, nil, err
	}
	if !publicKeysEqual(certs[0].PublicKey, key.Public()) {
		return nil, nil, fmt.Errorf("%s does not hold the key of %s", keyFile, certFile)
	}
	return certs[0], key, nil
}

// crossSign has the cross root of dir, when there is one, sign another
// certificate for inter's subject and key, naming the cross root's CRL:
// the alternate chain's first certificate. nil, nil when dir has no cross
// root. The cross root's CRL is signed again (SignRootCRL).
func crossSign(dir string, inter *x509.Certificate, o CAOptions) (*x509.Certificate, error) {
	if _, err := os.Stat(filepath.Join(dir, CrossRootKeyFile)); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	root, key, err := rootOf(dir, CrossRootCertFile, CrossRootKeyFile)
	if err != nil {
		return nil, fmt.Errorf("cross-signing: %w", err)
	}
	tmpl, err := IntermediateTemplate(subordinateName(inter.Subject.CommonName, inter.Subject, o.Country), inter.PublicKey, inter.NotBefore, inter.NotAfter, RootCRLURL(o.URLBase, root))
	if err != nil {
		return nil, err
	}
	cross, err := SignCA(root, key, tmpl, inter.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("cross-signing %s: %w", inter.Subject.CommonName, err)
	}
	if _, err := SignRootCRL(dir, CrossRootCertFile, CrossRootKeyFile, o.URLBase); err != nil {
		return nil, err
	}
	return cross, nil
}

// InitCrossRoot makes a second root in dir (ECDSA P-384, named "<o.Name>
// Root CA X2", in o.Country) and has it sign the intermediate of `ca init`
// again, so that every certificate of that intermediate has an alternate
// chain to it; the cross root signs its CRL (root-x2.crl). It refuses
// (ErrExists) when the cross root exists.
func InitCrossRoot(dir string, o CAOptions) (rootPath string, err error) {
	o, err = o.withDefaults()
	if err != nil {
		return "", err
	}
	chain, err := ReadCertificates(filepath.Join(dir, IntermediateCertFile))
	if err != nil {
		return "", fmt.Errorf("making the cross root: %w", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, CrossRootKeyFile)); err == nil {
		return "", fmt.Errorf("making the cross root: %s: %w", CrossRootKeyFile, ErrExists)
	}
	now := time.Now().Truncate(time.Second).UTC()
	root, key, err := newRoot(o.Name+" Root CA X2", o, now)
	if err != nil {
		return "", err
	}
	der := root.Raw
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", err
	}
	if err := WriteNew(filepath.Join(dir, CrossRootKeyFile), 0o600, &pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}); err != nil {
		return "", err
	}
	if err := WriteNew(filepath.Join(dir, CrossRootCertFile), 0o644, &pem.Block{Type: "CERTIFICATE", Bytes: der}); err != nil {
		return "", err
	}
	cross, err := crossSign(dir, chain[0], o)
	if err != nil {
		return "", err
	}
	if err := WriteNew(filepath.Join(dir, CrossIntermediate), 0o644, &pem.Block{Type: "CERTIFICATE", Bytes: cross.Raw}); err != nil {
		return "", err
	}
	return filepath.Join(dir, CrossRootCertFile), nil
}

// CreateIntermediate makes a new intermediate under the root of dir (and
// cross-signed by its cross root, when there is one), named cn, with a key
// of keyType, and writes it to dir/issuers/<id>.key, <id>.pem and
// <id>.x2.pem; each root that signed signs its CRL again (SignRootCRL).
// o gives the URL base and the country when the root names none. The new
// issuer is returned loaded.
func CreateIntermediate(dir string, o CAOptions, cn, keyType string) (*Issuer, error) {
	key, err := GenerateKey(keyType)
	if err != nil {
		return nil, err
	}
	cert, cross, err := CertifyIntermediate(dir, o, cn, key.Public())
	if err != nil {
		return nil, err
	}
	id := hex.EncodeToString(cert.SubjectKeyId)
	sub := filepath.Join(dir, IntermediatesDir)
	if err := os.MkdirAll(sub, 0o700); err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	if err := WriteNew(filepath.Join(sub, id+keySuffix), 0o600, &pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}); err != nil {
		return nil, err
	}
	if err := WriteIntermediate(dir, cert, cross); err != nil {
		return nil, err
	}
	return LoadIntermediate(dir, id)
}

// CertifyIntermediate has the root of dir sign a new intermediate named cn
// for pub (held anywhere: a key file, a PKCS#11 token), linted before it is
// signed as every CA certificate, and its cross root, when dir has one,
// sign its twin (nil otherwise); each root that signed signs its CRL again.
// It writes nothing else: WriteIntermediate does.
func CertifyIntermediate(dir string, o CAOptions, cn string, pub crypto.PublicKey) (cert, cross *x509.Certificate, err error) {
	o, err = o.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	root, rootKey, err := rootOf(dir, RootCertFile, RootKeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("creating an intermediate in %s (run `hallmark-worker ca init` first): %w", dir, err)
	}
	cert, err = SignIntermediate(root, rootKey, o, cn, pub)
	if err != nil {
		return nil, nil, err
	}
	if _, err := SignRootCRL(dir, RootCertFile, RootKeyFile, o.URLBase); err != nil {
		return nil, nil, err
	}
	cross, err = crossSign(dir, cert, o)
	if err != nil {
		return nil, nil, err
	}
	return cert, cross, nil
}

// SignIntermediate has root sign an intermediate named cn for pub, for
// IntermediateValidity or to the root's own expiry, linted before it is
// signed (SignCA); o gives the root's CRL URL base and the country when the
// root names none.
func SignIntermediate(root *x509.Certificate, rootKey crypto.Signer, o CAOptions, cn string, pub crypto.PublicKey) (*x509.Certificate, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	now := time.Now().Truncate(time.Second).UTC()
	notAfter := now.Add(IntermediateValidity)
	if notAfter.After(root.NotAfter) {
		notAfter = root.NotAfter
	}
	tmpl, err := IntermediateTemplate(subordinateName(cn, root.Subject, o.Country), pub, now, notAfter, RootCRLURL(o.URLBase, root))
	if err != nil {
		return nil, err
	}
	cert, err := SignCA(root, rootKey, tmpl, pub)
	if err != nil {
		return nil, fmt.Errorf("signing the intermediate %s: %w", cn, err)
	}
	return cert, nil
}

// WriteIntermediate writes an intermediate's certificate, and its
// cross-signed twin when there is one, to dir/issuers/<id>.pem and
// <id>.x2.pem, refusing to replace either.
func WriteIntermediate(dir string, cert, cross *x509.Certificate) error {
	id := hex.EncodeToString(cert.SubjectKeyId)
	sub := filepath.Join(dir, IntermediatesDir)
	if err := os.MkdirAll(sub, 0o700); err != nil {
		return err
	}
	if cross != nil {
		if err := WriteNew(filepath.Join(sub, id+crossSuffix), 0o644, &pem.Block{Type: "CERTIFICATE", Bytes: cross.Raw}); err != nil {
			return err
		}
	}
	return WriteNew(filepath.Join(sub, id+intermediateSuffix), 0o644, &pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
}

var issuerIDSyntax = regexp.MustCompile(`^[0-9a-f]{2,128}$`)

// LoadIntermediate loads the issuer id of dir: the intermediate of `ca
// init`, or one CreateIntermediate made. It checks the key and that each
// chain verifies to its root.
func LoadIntermediate(dir, id string) (*Issuer, error) {
	if !issuerIDSyntax.MatchString(id) {
		return nil, fmt.Errorf("issuer id %q is not the hex of a key id", id)
	}
	sub := filepath.Join(dir, IntermediatesDir)
	if _, err := os.Stat(filepath.Join(sub, id+intermediateSuffix)); errors.Is(err, fs.ErrNotExist) {
		iss, err := LoadLocal(dir)
		if err != nil {
			return nil, err
		}
		if iss.ID != id {
			return nil, fmt.Errorf("issuer %s: neither %s nor %s holds it", id, filepath.Join(sub, id+intermediateSuffix), filepath.Join(dir, IntermediateCertFile))
		}
		return iss, nil
	}
	return loadFiles(dir, filepath.Join(sub, id+intermediateSuffix), filepath.Join(sub, id+keySuffix), filepath.Join(sub, id+crossSuffix))
}

// loadFiles loads an issuer from its certificate and key files, with the
// alternate chain of crossFile when it exists.
func loadFiles(dir, certFile, keyFile, crossFile string) (*Issuer, error) {
	chain, err := ReadCertificates(certFile)
	if err != nil {
		return nil, err
	}
	key, err := ReadKey(keyFile)
	if err != nil {
		return nil, err
	}
	if err := verifiesTo(chain, filepath.Join(dir, RootCertFile)); err != nil {
		return nil, err
	}
	iss, err := NewIssuer(chain[0], chain, key)
	if err != nil {
		return nil, err
	}
	if err := iss.loadCross(dir, crossFile); err != nil {
		return nil, err
	}
	return iss, nil
}

// loadCross adds the alternate chain of crossFile, when it exists: the
// same subject and key, signed by the cross root.
func (i *Issuer) loadCross(dir, crossFile string) error {
	cross, err := ReadCertificates(crossFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !publicKeysEqual(cross[0].PublicKey, i.Cert.PublicKey) {
		return fmt.Errorf("%s certifies another key than the issuer's", crossFile)
	}
	if err := verifiesTo(cross, filepath.Join(dir, CrossRootCertFile)); err != nil {
		return err
	}
	i.AltChains = append(i.AltChains, cross)
	return nil
}

// verifiesTo checks that chain[0] chains through chain[1:] to a root of
// rootFile.
func verifiesTo(chain []*x509.Certificate, rootFile string) error {
	roots, err := ReadCertificates(rootFile)
	if err != nil {
		return err
	}
	pool, inter := x509.NewCertPool(), x509.NewCertPool()
	for _, r := range roots {
		pool.AddCert(r)
	}
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err = chain[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}, CurrentTime: chainTime(chain, roots)})
	if err != nil {
		return fmt.Errorf("%s does not chain to %s: %w", chain[0].Subject.CommonName, rootFile, err)
	}
	return nil
}

// chainTime is when a chain check looks at chain and roots: a second after
// the latest notBefore among them. A cross root made seconds after the
// intermediate it cross-signs is not yet valid at the intermediate's own
// notBefore; the check is whether the signatures chain, not the dates.
func chainTime(chain, roots []*x509.Certificate) time.Time {
	var t time.Time
	for _, c := range append(append([]*x509.Certificate{}, chain...), roots...) {
		if c.NotBefore.After(t) {
			t = c.NotBefore
		}
	}
	return t.Add(time.Second)
}

// AltChainsPEM are the issuer's alternate chains, each PEM-encoded as it
// follows the leaf.
func (i *Issuer) AltChainsPEM() [][]byte {
	out := make([][]byte, 0, len(i.AltChains))
	for _, chain := range i.AltChains {
		var b []byte
		for _, c := range chain {
			b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
		}
		out = append(out, b)
	}
	return out
}
