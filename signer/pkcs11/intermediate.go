package pkcs11

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/ThalesGroup/crypto11"

	"github.com/hallmark-ca/hallmark/signer"
)

// An intermediate made after `ca init` whose key is on a token: the key is
// generated there under a label of its own, the root of ca.dir signs its
// certificate, and the issuer record names the backend, the label and the
// CKA_ID, by which a worker mounting that backend finds the key again.

// NewKeyLabel is a label no key on any token has yet: "hallmark-issuer-"
// and 8 random bytes in hex.
func NewKeyLabel() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "hallmark-issuer-" + hex.EncodeToString(b), nil
}

// KeyIDFor is the CKA_ID CreateIntermediate gives the key labelled label.
func KeyIDFor(label string) []byte { return idFor(label) }

// CreateIntermediate generates a keyType key pair on the token of cfg
// under cfg.KeyLabel (with the CKA_ID KeyIDFor(cfg.KeyLabel) when cfg.KeyID
// is empty), has the root of dir sign its intermediate certificate named
// cn (signer.CertifyIntermediate: linted before it is signed, and
// cross-signed when dir has a cross root) and writes it to
// dir/issuers/<id>.pem. It refuses a label or id the token holds already
// (signer.ErrExists). A key whose certificate could not be made is deleted
// from the token again. It returns the issuer, signing on the token, the
// token to close, and cfg as it names the key.
func CreateIntermediate(cfg Config, dir string, o signer.CAOptions, cn, keyType string) (*signer.Issuer, *Token, Config, error) {
	if cfg.KeyLabel == "" {
		return nil, nil, cfg, errors.New("creating a PKCS#11 intermediate: name the new key's label")
	}
	if len(cfg.KeyID) == 0 {
		cfg.KeyID = KeyIDFor(cfg.KeyLabel)
	}
	ctx, err := crypto11.Configure(cfg.crypto11())
	if err != nil {
		return nil, nil, cfg, fmt.Errorf("opening PKCS#11 %s: %w", cfg, err)
	}
	key, err := generateKey(ctx, cfg, keyType)
	if err != nil {
		_ = ctx.Close()
		return nil, nil, cfg, err
	}
	cert, cross, err := signer.CertifyIntermediate(dir, o, cn, key.Public())
	if err == nil {
		err = signer.WriteIntermediate(dir, cert, cross)
	}
	if err != nil {
		if derr := key.Delete(); derr != nil {
			err = fmt.Errorf("%w (and the key %q could not be deleted from the token: %v)", err, cfg.KeyLabel, derr)
		}
		_ = ctx.Close()
		return nil, nil, cfg, err
	}
	_ = ctx.Close()
	var alt [][]*x509.Certificate
	if cross != nil {
		alt = [][]*x509.Certificate{{cross}}
	}
	iss, tok, err := OpenIssuer(cfg, []*x509.Certificate{cert}, alt)
	return iss, tok, cfg, err
}

// OpenIssuer opens the token of cfg and builds the issuer of chain (its
// certificate first) with the key cfg's label and id name whose public
// key is the certificate's, and the alternate chains alt. A worker opens a
// managed PKCS#11 issuer so, by its record.
func OpenIssuer(cfg Config, chain []*x509.Certificate, alt [][]*x509.Certificate) (*signer.Issuer, *Token, error) {
	if len(chain) == 0 {
		return nil, nil, errors.New("opening a PKCS#11 issuer: no certificate")
	}
	tok, err := Open(cfg, chain[0].PublicKey)
	if err != nil {
		return nil, nil, err
	}
	iss, err := signer.NewIssuer(chain[0], chain, tok)
	if err != nil {
		_ = tok.Close()
		return nil, nil, fmt.Errorf("PKCS#11 %s: %w", cfg, err)
	}
	iss.AltChains = alt
	return iss, tok, nil
}
