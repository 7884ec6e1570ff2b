package pkcs11_test

import (
	"context"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/signer/pkcs11"
)

// TestCreateIntermediateOnToken: an intermediate made after `ca init`
// with its key generated on a real SoftHSM2 token; the root signs it (and
// the cross root its twin), it passes zlint, it is written to
// ca.dir/issuers, and a worker opening it by the label and id alone signs
// a certificate that verifies to the root. The same label is refused, and
// a key whose certificate cannot be made is taken off the token again.
func TestCreateIntermediateOnToken(t *testing.T) {
	needHSM(t)
	tokenMu.RLock()
	defer tokenMu.RUnlock()
	dir := t.TempDir()
	o := signer.CAOptions{Name: "PKCS11 Rotation", URLBase: "http://ca.test"}
	if _, err := signer.InitLocal(dir, o); err != nil {
		t.Fatal(err)
	}
	if _, err := signer.InitCrossRoot(dir, o); err != nil {
		t.Fatal(err)
	}
	label := fmt.Sprintf("rotate-%d", labels.Add(1))
	cfg := pkcs11.Config{Module: hsm.module, TokenLabel: tokenLabel, PIN: userPIN, KeyLabel: label, MaxSessions: 4}
	iss, tok, named, err := pkcs11.CreateIntermediate(cfg, dir, o, "PKCS11 Rotation HSM B", "p384")
	if err != nil {
		t.Fatalf("CreateIntermediate: %v", err)
	}
	_ = tok.Close()
	// The id is the one derived from the label; what matters is that the
	// key is found again by both, below (OpenIssuer).
	if named.KeyLabel != label {
		t.Fatalf("the key is labelled %q; want %q", named.KeyLabel, label)
	}
	if err := signer.LintCACertificate(iss.Cert.Raw); err != nil {
		t.Fatalf("zlint: %v", err)
	}
	if len(iss.AltChains) != 1 {
		t.Fatalf("%d alternate chains; want the cross root's", len(iss.AltChains))
	}
	for _, f := range []string{iss.ID + ".pem", iss.ID + ".x2.pem"} {
		if _, err := os.Stat(filepath.Join(dir, signer.IntermediatesDir, f)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, signer.IntermediatesDir, iss.ID+".key")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a key file was written for a key on the token: %v", err)
	}

	// A worker knows the label, the id and the certificate: nothing else.
	byRecord := pkcs11.Config{Module: hsm.module, TokenLabel: tokenLabel, PIN: userPIN, MaxSessions: 4,
		KeyLabel: label, KeyID: named.KeyID}
	opened, tok2, err := pkcs11.OpenIssuer(byRecord, []*x509.Certificate{iss.Cert}, nil)
	if err != nil {
		t.Fatalf("OpenIssuer: %v", err)
	}
	defer tok2.Close()
	if opened.ID != hex.EncodeToString(iss.Cert.SubjectKeyId) {
		t.Fatalf("opened issuer %s, want %x", opened.ID, iss.Cert.SubjectKeyId)
	}
	issued, err := opened.Issue(context.Background(), leafRequest(t, opened, "b.rotate.test"))
	if err != nil {
		t.Fatal(err)
	}
	verify(t, &ca{dir: dir}, issued.ChainPEM, "b.rotate.test")

	if _, _, _, err := pkcs11.CreateIntermediate(cfg, dir, o, "PKCS11 Rotation HSM C", "p256"); !errors.Is(err, signer.ErrExists) {
		t.Fatalf("a second key under label %s: %v; want ErrExists", label, err)
	}

	// No root in this directory: the key generated is deleted again.
	lost := fmt.Sprintf("rootless-%d", labels.Add(1))
	cfg.KeyLabel = lost
	if _, _, _, err := pkcs11.CreateIntermediate(cfg, t.TempDir(), o, "PKCS11 Rootless", "p256"); err == nil {
		t.Fatal("an intermediate was made without a root")
	}
	cfg.KeyID = pkcs11.KeyIDFor(lost)
	if _, err := pkcs11.Open(cfg, nil); err == nil {
		t.Fatalf("the key %s of a failed creation is still on the token", lost)
	}
}
