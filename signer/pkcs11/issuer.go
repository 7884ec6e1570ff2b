package pkcs11

import (
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/ThalesGroup/crypto11"

	"github.com/hallmark-ca/hallmark/signer"
)

// LoadIssuer opens the token and builds the issuer from certFile: the
// certificate of the token's key first, then any further intermediates
// (PEM). signer.NewIssuer checks that the key on the token belongs to it.
func LoadIssuer(cfg Config, certFile string) (*signer.Issuer, *Token, error) {
	chain, err := signer.ReadCertificates(certFile)
	if err != nil {
		return nil, nil, fmt.Errorf("loading the PKCS#11 issuer certificate: %w", err)
	}
	tok, err := Open(cfg, chain[0].PublicKey)
	if err != nil {
		return nil, nil, fmt.Errorf("%w (issuer certificate %s)", err, certFile)
	}
	iss, err := signer.NewIssuer(chain[0], chain, tok)
	if err != nil {
		_ = tok.Close()
		return nil, nil, fmt.Errorf("PKCS#11 %s with %s: %w", cfg, certFile, err)
	}
	return iss, tok, nil
}

// KeyTypes are the issuing key types Init can generate.
var KeyTypes = []string{"p256", "p384", "rsa2048", "rsa3072", "rsa4096"}

// Init generates a new issuing key pair on the token under cfg.KeyLabel (or
// cfg.KeyID), has the root in rootCertFile/rootKeyFile sign its intermediate
// CA certificate, and writes it to certFile. It refuses when certFile exists
// or the token already holds a key with that label or id, so a re-run never
// replaces a key that certificates chain to. o gives the root's CRL URL
// base and a country when the root names none (signer.CAOptions); the
// caller signs the root's CRL again. It returns the certificate.
func Init(cfg Config, keyType, commonName, rootCertFile, rootKeyFile, certFile string, o signer.CAOptions) (*x509.Certificate, error) {
	if o.URLBase == "" {
		return nil, errors.New("initialising PKCS#11 issuer: the CA's URL base (ca.url_base) is empty")
	}
	if _, err := os.Lstat(certFile); err == nil {
		return nil, fmt.Errorf("initialising PKCS#11 issuer: %s: %w", certFile, signer.ErrExists)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	roots, err := signer.ReadCertificates(rootCertFile)
	if err != nil {
		return nil, fmt.Errorf("initialising PKCS#11 issuer: reading the root: %w", err)
	}
	rootKey, err := signer.ReadKey(rootKeyFile)
	if err != nil {
		return nil, fmt.Errorf("initialising PKCS#11 issuer: reading the root key: %w", err)
	}
	root := roots[0]
	ctx, err := crypto11.Configure(cfg.crypto11())
	if err != nil {
		return nil, fmt.Errorf("opening PKCS#11 %s: %w", cfg, err)
	}
	defer ctx.Close()
	key, err := generateKey(ctx, cfg, keyType)
	if err != nil {
		return nil, err
	}
	cert, err := signer.SignIntermediate(root, rootKey, o, commonName, key.Public())
	if err != nil {
		return nil, fmt.Errorf("the PKCS#11 intermediate: %w", err)
	}
	if err := signer.WriteNew(certFile, 0o644, &pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}); err != nil {
		return nil, err
	}
	return cert, nil
}

// generateKey makes a keyType key pair on the token under cfg's label and
// id (a label or id of its own when cfg names none), refusing when the
// token holds a key with either already.
func generateKey(ctx *crypto11.Context, cfg Config, keyType string) (crypto11.Signer, error) {
	id, label := cfg.KeyID, []byte(cfg.KeyLabel)
	if len(id) == 0 {
		id = idFor(cfg.KeyLabel)
	}
	if len(label) == 0 {
		label = []byte(fmt.Sprintf("hallmark-%x", id))
	}
	for _, q := range [][2][]byte{{id, nil}, {nil, label}} {
		if k, err := ctx.FindKeyPair(q[0], q[1]); err == nil && k != nil {
			return nil, fmt.Errorf("initialising PKCS#11 issuer: the token already holds a key pair labelled %q or with id %x: %w", label, id, signer.ErrExists)
		}
	}
	var key crypto11.Signer
	var err error
	switch keyType {
	case "p256":
		key, err = ctx.GenerateECDSAKeyPairWithLabel(id, label, elliptic.P256())
	case "p384":
		key, err = ctx.GenerateECDSAKeyPairWithLabel(id, label, elliptic.P384())
	case "rsa2048", "rsa3072", "rsa4096":
		bits := map[string]int{"rsa2048": 2048, "rsa3072": 3072, "rsa4096": 4096}[keyType]
		key, err = ctx.GenerateRSAKeyPairWithLabel(id, label, bits)
	default:
		return nil, fmt.Errorf("initialising PKCS#11 issuer: key type %q is not one of %v", keyType, KeyTypes)
	}
	if err != nil {
		return nil, fmt.Errorf("generating a %s key on PKCS#11 %s: %w", keyType, cfg, err)
	}
	return key, nil
}
