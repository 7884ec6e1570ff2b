package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/hex"
	"path/filepath"
	"testing"

	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// TestRootCRLsPublished: the CRLs `ca init --cross-root` signs are stored
// as each root's shard 0, what the frontend serves at /crl/<root id>;
// publishing them again (every worker start) changes nothing and fails
// nothing; `ca root-crl`'s renewal is numbered higher, valid a year, and
// published over them. On both stores.
func TestRootCRLsPublished(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testdb.Open(t, dialect)
			dir := filepath.Join(t.TempDir(), "ca")
			o := signer.CAOptions{Name: "Publish", URLBase: "http://ca.test"}
			if _, err := signer.InitLocal(dir, o); err != nil {
				t.Fatal(err)
			}
			if _, err := signer.InitCrossRoot(dir, o); err != nil {
				t.Fatal(err)
			}
			first, err := publishRootCRLs(ctx, db.Store, dir)
			if err != nil || len(first) != 2 {
				t.Fatalf("publishing: %d CRLs, %v; want both roots'", len(first), err)
			}
			if again, err := publishRootCRLs(ctx, db.Store, dir); err != nil || len(again) != 2 {
				t.Fatalf("publishing the same CRLs again: %d, %v", len(again), err)
			}
			for i, f := range []string{signer.RootCertFile, signer.CrossRootCertFile} {
				root, err := signer.ReadCertificates(filepath.Join(dir, f))
				if err != nil {
					t.Fatal(err)
				}
				wantServed(t, db.Store, hex.EncodeToString(root[0].SubjectKeyId), root[0], first[i].DER)
			}
			renewed, err := signer.RefreshRootCRLs(dir, o.URLBase)
			if err != nil || len(renewed) != 2 {
				t.Fatalf("renewing: %d, %v", len(renewed), err)
			}
			if _, err := publishRootCRLs(ctx, db.Store, dir); err != nil {
				t.Fatal(err)
			}
			for i, r := range renewed {
				if r.Number <= first[i].Number || r.NextUpdate.Sub(r.ThisUpdate) != signer.ARLValidity {
					t.Errorf("renewed CRL of %s: number %d after %d, valid %s", r.IssuerID, r.Number, first[i].Number, r.NextUpdate.Sub(r.ThisUpdate))
				}
				root, _ := signer.ReadCertificates(filepath.Join(dir, []string{signer.RootCertFile, signer.CrossRootCertFile}[i]))
				wantServed(t, db.Store, r.IssuerID, root[0], r.DER)
			}
		})
	}
}

// wantServed fails unless the newest stored CRL of shard 0 of id is der,
// signed by root.
func wantServed(t *testing.T, st store.Store, id string, root *x509.Certificate, der []byte) {
	t.Helper()
	c, err := st.CRLShardLatest(context.Background(), id, 0)
	if err != nil {
		t.Fatalf("the CRL of root %s: %v", id, err)
	}
	if !bytes.Equal(c.DER, der) {
		t.Fatalf("root %s: the stored CRL is number %d, not the one signed", id, c.Number)
	}
	rl, err := x509.ParseRevocationList(c.DER)
	if err != nil || rl.CheckSignatureFrom(root) != nil || rl.Number.Int64() != c.Number {
		t.Fatalf("root %s: the stored CRL (number %d) is not %s's: %v", id, c.Number, root.Subject.CommonName, err)
	}
}
