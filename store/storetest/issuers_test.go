package storetest

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/store"
)

// testIssuerPublish: the frontend serves what a worker published, and a
// re-publish (a renewed intermediate under the same key) replaces it.
func testIssuerPublish(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	if _, err := s.IssuerCert(ctx, "abc"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("IssuerCert of an unpublished issuer: %v, want ErrNotFound", err)
	}
	for _, der := range [][]byte{{0x30, 0x01, 0x02}, {0x30, 0x03, 0x04, 0x05}} {
		if err := s.IssuerPublish(ctx, "abc", der); err != nil {
			t.Fatalf("IssuerPublish: %v", err)
		}
		got, err := s.IssuerCert(ctx, "abc")
		if err != nil || !bytes.Equal(got, der) {
			t.Fatalf("IssuerCert = %x, %v; want %x", got, err, der)
		}
	}
}

// wantIssuers fails unless s lists exactly want (sorted), and every stored
// certificate's issuer is among them.
func wantIssuers(t *testing.T, s store.Store, x Extras, want ...string) {
	t.Helper()
	got, err := s.Issuers(ctxT(t))
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("Issuers = %q, %v; want %q", got, err, want)
	}
	if n := x.Int(t, `SELECT count(*) FROM certificates WHERE issuer_id NOT IN (SELECT id FROM issuers)`); n != 0 {
		t.Fatalf("%d certificates of an issuer the views do not list", n)
	}
}

// testIssuersListed: the CRL views list an issuer whose only trace is a
// certificate (a relay's or custom backend's publishes no certificate and
// signs no CRL), as well as a published one and one with a CRL; an
// issuance that stores nothing lists nothing.
func testIssuersListed(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	for _, tc := range []struct{ serial, issuer string }{
		{"0a01", "relay:upstream"},
		{"0a02", "custom:hooks"},
		{"0a03", "relay:upstream"}, // registered already
	} {
		if err := issueAs(t, s, readyOrder(t, s, a, tc.serial+".example.com"), tc.serial, tc.issuer); err != nil {
			t.Fatalf("issuing %s by %s: %v", tc.serial, tc.issuer, err)
		}
	}
	// Another process's first certificate of an issuer this one knows.
	other := x.Open(t, nil)
	if err := issueAs(t, other, readyOrder(t, other, a, "0a04.example.com"), "0a04", "relay:upstream"); err != nil {
		t.Fatal(err)
	}
	// The order is valid already: nothing is stored, and its issuer is
	// not listed.
	o := readyOrder(t, s, a, "0a05.example.com")
	mustIssue(t, s, o, "0a05")
	wantErr(t, "issuing an issued order", issueAs(t, s, order(t, s, o.ID), "0a06", "relay:never"), store.ErrConflict)
	if err := s.IssuerPublish(ctx, "published-only", []byte{0x30, 0x00}); err != nil {
		t.Fatal(err)
	}
	if err := s.CRLStore(ctx, store.CRL{IssuerID: "crl-only", Number: 1, ThisUpdate: dbNow(t, s), NextUpdate: dbNow(t, s).Add(time.Hour), DER: []byte{0x30}}); err != nil {
		t.Fatal(err)
	}
	wantIssuers(t, s, x, "crl-only", "custom:hooks", "issuer-1", "published-only", "relay:upstream")
}

// testIssuersMigrated: on a database the schema before migration 0009
// populated (no issuers table: the views found issuers among the
// certificates), migrating lists every issuer of a certificate, a CRL or a
// published certificate.
func testIssuersMigrated(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	if err := issueAs(t, s, readyOrder(t, s, a, "old.example.com"), "0b01", "relay:upstream"); err != nil {
		t.Fatal(err)
	}
	mustIssue(t, s, readyOrder(t, s, a, "local.example.com"), "0b02")
	if err := s.IssuerPublish(ctx, "published-only", []byte{0x30, 0x00}); err != nil {
		t.Fatal(err)
	}
	if err := s.CRLStore(ctx, store.CRL{IssuerID: "crl-only", Number: 1, ThisUpdate: dbNow(t, s), NextUpdate: dbNow(t, s).Add(time.Hour), DER: []byte{0x30}}); err != nil {
		t.Fatal(err)
	}
	// The rows as they stand, in the schema 0008 left.
	x.Exec(t, `DROP TABLE issuers`)
	x.Exec(t, `DELETE FROM schema_migrations WHERE version = 9`)
	applied, err := x.Migrate(ctx)
	if err != nil || !slices.Equal(applied, []int{9}) {
		t.Fatalf("migrating the old schema applied %v, %v; want [9]", applied, err)
	}
	wantIssuers(t, x.Open(t, nil), x, "crl-only", "issuer-1", "published-only", "relay:upstream")
}
