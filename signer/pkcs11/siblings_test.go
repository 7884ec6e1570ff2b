package pkcs11_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/signer/pkcs11"
)

// TestTwoIssuersOnOneTokenComeBack: a worker holds two issuers whose keys
// are on one token (the mounted one and the one a rotation made); the
// token goes away while only one signs, and comes back: both sign again.
// The module their contexts share is opened afresh only once both have let
// go of it, so the one that failed has the other let go too.
func TestTwoIssuersOnOneTokenComeBack(t *testing.T) {
	tokenMu.Lock()
	defer tokenMu.Unlock()
	a := newCA(t, "sibling-a", "p256")
	o := signer.CAOptions{URLBase: "http://ca.test"}
	cfg := a.cfg
	cfg.KeyLabel = fmt.Sprintf("sibling-b-%d", labels.Add(1))
	b, tokB, _, err := pkcs11.CreateIntermediate(cfg, a.dir, o, "PKCS11 Sibling B", "p256")
	if err != nil {
		t.Fatal(err)
	}
	defer tokB.Close()
	issue := func(iss *signer.Issuer, name string) error {
		_, err := iss.Issue(context.Background(), leafRequest(t, iss, name))
		return err
	}
	for _, iss := range []*signer.Issuer{a.iss, b} {
		if err := issue(iss, "before.sibling.test"); err != nil {
			t.Fatal(err)
		}
	}
	away := hsm.tokenDir + ".away"
	if err := os.Rename(hsm.tokenDir, away); err != nil {
		t.Fatal(err)
	}
	back := func() { _ = os.Rename(away, hsm.tokenDir) }
	defer back()
	// Only the mounted issuer signs while the token is away: the other one
	// (retiring, say, its CRL not due) makes no call that would fail.
	for _, iss := range []*signer.Issuer{a.iss, a.iss} {
		if err := issue(iss, "away.sibling.test"); !errors.Is(err, signer.ErrUnavailable) {
			back()
			t.Fatalf("%s with the token away: %v, want signer.ErrUnavailable", iss.Cert.Subject.CommonName, err)
		}
	}
	back()
	for _, iss := range []*signer.Issuer{a.iss, b} {
		if err := issue(iss, "back.sibling.test"); err != nil {
			t.Fatalf("%s after the token came back: %v", iss.Cert.Subject.CommonName, err)
		}
	}
}
