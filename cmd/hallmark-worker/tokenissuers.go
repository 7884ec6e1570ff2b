package main

import (
	"context"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hallmark-ca/hallmark/cmd/config"
	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/signer/pkcs11"
	"github.com/hallmark-ca/hallmark/store"
)

// Issuers whose key is on a PKCS#11 token: `ca intermediate --pkcs11`
// generates one there, its record names the backend, the key's label and
// its CKA_ID, and a worker mounting that backend opens it by them when a
// profile of the backend is rotated to it (or, retiring, to sign its CRLs).

// tokenConfig is the token of [backends.<name>] (type pkcs11), its key
// named by label and id instead of the backend's key_label and key_id.
func tokenConfig(cfg config.Config, name, label string, id []byte) (pkcs11.Config, error) {
	b, ok := cfg.Backends[name]
	if !ok || b.Type != "pkcs11" {
		return pkcs11.Config{}, fmt.Errorf("there is no [backends.%s] of type pkcs11", name)
	}
	pc, err := pkcs11.ConfigFor(b.PKCS11, b.Timeout())
	if err != nil {
		return pkcs11.Config{}, fmt.Errorf("backends.%s: %w", name, err)
	}
	pc.KeyLabel, pc.KeyID = label, id
	return pc, nil
}

// createOnToken makes the intermediate of `ca intermediate --pkcs11
// <backend>`: its key generated on the backend's token under --key-label
// (or a new label), its certificate signed by the root of ca.dir.
func createOnToken(c *cli.Context, cfg config.Config, backend string) (*signer.Issuer, store.IssuerRecord, error) {
	label := c.String("key-label")
	if label == "" {
		var err error
		if label, err = pkcs11.NewKeyLabel(); err != nil {
			return nil, store.IssuerRecord{}, err
		}
	}
	pc, err := tokenConfig(cfg, backend, label, nil)
	if err != nil {
		return nil, store.IssuerRecord{}, cli.Exit("--pkcs11 "+backend+": "+err.Error(), 2)
	}
	iss, tok, named, err := pkcs11.CreateIntermediate(pc, cfg.CA.Dir, caOptions(cfg, ""), c.String("name"), c.String("key-type"))
	if err != nil {
		return nil, store.IssuerRecord{}, err
	}
	_ = tok.Close()
	rec := record(iss)
	rec.Backend, rec.KeyLabel, rec.KeyID = backend, named.KeyLabel, hex.EncodeToString(named.KeyID)
	return iss, rec, nil
}

// tokenRecord is the record of the issuer [backends.<name>] mounts from
// its configuration (cert, key_label or key_id).
func tokenRecord(cfg config.Config, backend string, iss *signer.Issuer) store.IssuerRecord {
	rec := record(iss)
	b := cfg.Backends[backend]
	rec.Backend, rec.KeyLabel, rec.KeyID = backend, b.PKCS11.KeyLabel, b.PKCS11.KeyID
	return rec
}

// issuerLoader loads a managed issuer by its record: a local one from
// ca.dir, one on a token from the token of the backend it names, as the
// configuration reads now (current), with the certificate the store
// publishes for it.
func issuerLoader(current func() config.Config, st store.Store) func(id string) (*signer.Issuer, error) {
	return func(id string) (*signer.Issuer, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		recs, err := st.IssuerRecordsList(ctx)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if r.ID != id {
				continue
			}
			return loadRecord(ctx, current(), st, r)
		}
		return nil, fmt.Errorf("issuer %s has no record: %w", id, store.ErrNotFound)
	}
}

// loadRecord loads the issuer of r from where its key is: ca.dir, or the
// token of its pkcs11 backend.
func loadRecord(ctx context.Context, cfg config.Config, st store.Store, r store.IssuerRecord) (*signer.Issuer, error) {
	if r.Backend == "" {
		return signer.LoadIntermediate(cfg.CA.Dir, r.ID)
	}
	return openOnToken(ctx, cfg, st, r)
}

// openOnToken opens the issuer of r, whose key is on the token of
// r.Backend: the certificate is the one published for it, which the root
// of ca.dir, when this worker has it, must have signed.
func openOnToken(ctx context.Context, cfg config.Config, st store.Store, r store.IssuerRecord) (*signer.Issuer, error) {
	id, err := hex.DecodeString(r.KeyID)
	if err != nil {
		return nil, fmt.Errorf("issuer %s: key id %q: %w", r.ID, r.KeyID, err)
	}
	pc, err := tokenConfig(cfg, r.Backend, r.KeyLabel, id)
	if err != nil {
		return nil, fmt.Errorf("issuer %s is on the token of backend %s: %w", r.ID, r.Backend, err)
	}
	der, err := st.IssuerCert(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("issuer %s: %w", r.ID, err)
	}
	if hex.EncodeToString(cert.SubjectKeyId) != r.ID {
		return nil, fmt.Errorf("the certificate published for issuer %s is another's (%x)", r.ID, cert.SubjectKeyId)
	}
	if roots, err := signer.ReadCertificates(filepath.Join(cfg.CA.Dir, signer.RootCertFile)); err == nil {
		if err := cert.CheckSignatureFrom(roots[0]); err != nil {
			return nil, fmt.Errorf("the certificate published for issuer %s is not signed by the root of ca.dir: %w", r.ID, err)
		}
	}
	alt, err := parseChains(r.Chains)
	if err != nil {
		return nil, fmt.Errorf("issuer %s: %w", r.ID, err)
	}
	iss, _, err := pkcs11.OpenIssuer(pc, []*x509.Certificate{cert}, alt)
	if err != nil {
		return nil, fmt.Errorf("issuer %s on backend %s: %w", r.ID, r.Backend, err)
	}
	return iss, nil
}

// parseChains parses alternate chains as a record keeps them, PEM.
func parseChains(chains [][]byte) ([][]*x509.Certificate, error) {
	var out [][]*x509.Certificate
	for _, p := range chains {
		var chain []*x509.Certificate
		for b, rest := pem.Decode(p); b != nil; b, rest = pem.Decode(rest) {
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, err
			}
			chain = append(chain, c)
		}
		if len(chain) == 0 {
			return nil, errors.New("an alternate chain holds no certificate")
		}
		out = append(out, chain)
	}
	return out, nil
}

// tokenBackends are the pkcs11 backends of the profiles this worker
// serves (worker.profiles, or all when empty).
func tokenBackends(cfg config.Config) map[string]bool {
	out := map[string]bool{}
	if cfg.Worker.Perspective != "" {
		return out // a perspective signs nothing
	}
	serves := servesProfile(cfg)
	for name, p := range cfg.Profiles {
		if p.Backend == "pkcs11" && serves(name) {
			out[p.Signer] = true
		}
	}
	return out
}
