package signer

import (
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSignRootCRLKeepsEntries: re-signing a root's CRL keeps every entry
// of the last one (an intermediate once revoked stays revoked), numbers
// it higher and makes it valid ARLValidity; a CRL file another key signed
// is refused, not carried forward.
func TestSignRootCRLKeepsEntries(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "ca")
	o := CAOptions{Name: "Keep", URLBase: "http://ca.test"}
	if _, err := InitLocal(dir, o); err != nil {
		t.Fatal(err)
	}
	root, key, err := rootOf(dir, RootCertFile, RootKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	ri, err := NewIssuer(root, nil, key)
	if err != nil {
		t.Fatal(err)
	}
	ri.Logger = quietLog
	// As if an intermediate had been revoked: the last CRL lists it.
	now := time.Now().Truncate(time.Second).UTC()
	revoked := RevokedEntry{Serial: big.NewInt(0x5ca1ab1e), RevokedAt: now.Add(-time.Hour), Reason: 1}
	// Numbered above the clock (a CRL signed on another copy of ca.dir with
	// a clock ahead): the next one must still number above it.
	ahead := time.Now().Add(time.Hour).UnixNano()
	der, err := ri.SignARL(ahead, now.Add(-time.Minute), now.Add(time.Hour), []RevokedEntry{revoked}, RootCRLURL(o.URLBase, root))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, RootCRLFile), der, 0o644); err != nil {
		t.Fatal(err)
	}
	next, err := SignRootCRL(dir, RootCertFile, RootKeyFile, o.URLBase)
	if err != nil {
		t.Fatal(err)
	}
	rl, err := readRootCRL(filepath.Join(dir, RootCRLFile), root)
	if err != nil {
		t.Fatal(err)
	}
	if next.Number != ahead+1 || rl.Number.Int64() != next.Number || rl.NextUpdate.Sub(rl.ThisUpdate) != ARLValidity {
		t.Fatalf("re-signed CRL: number %d (file %v), valid %s", next.Number, rl.Number, rl.NextUpdate.Sub(rl.ThisUpdate))
	}
	if len(rl.RevokedCertificateEntries) != 1 || rl.RevokedCertificateEntries[0].SerialNumber.Cmp(revoked.Serial) != 0 ||
		rl.RevokedCertificateEntries[0].ReasonCode != 1 {
		t.Fatalf("re-signed CRL lists %+v; want the revoked intermediate with reason keyCompromise", rl.RevokedCertificateEntries)
	}

	// A CRL the intermediate signed in the root's place is refused.
	inter, err := LoadLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	inter.Logger = quietLog
	forged, err := inter.SignARL(next.Number+1, now, now.Add(time.Hour), nil, RootCRLURL(o.URLBase, root))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, RootCRLFile), forged, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := SignRootCRL(dir, RootCertFile, RootKeyFile, o.URLBase); err == nil {
		t.Fatal("a CRL the root did not sign was carried forward")
	}
	if _, err := RootCRLs(dir); err == nil {
		t.Fatal("a CRL the root did not sign would be published")
	}
}
