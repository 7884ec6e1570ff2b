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

// testIssuerLifecycle: a profile's issuers are rotated in one step, the
// issuer no profile names any longer retires (it keeps its chains and its
// certificates' count), and it is retired only once none is outstanding.
func testIssuerLifecycle(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	now := dbNow(t, s)
	ev := store.AuditEvent{Actor: "test", Action: "issuer.test"}
	for _, r := range []store.IssuerRecord{
		{ID: "old", Name: "Old CA", KeyType: "p256", NotAfter: now.Add(time.Hour), Chains: [][]byte{[]byte("alt-1"), []byte("alt-2")}},
		{ID: "new", Name: "New CA", KeyType: "p256", NotAfter: now.Add(time.Hour)},
	} {
		if err := s.IssuerRecordPut(ctx, r, []byte{0x30, 0x00}, &ev); err != nil {
			t.Fatalf("IssuerRecordPut %s: %v", r.ID, err)
		}
	}
	if ok, err := s.ProfileIssuerDefault(ctx, "default", "old"); err != nil || !ok {
		t.Fatalf("ProfileIssuerDefault = %v, %v; want true", ok, err)
	}
	if ok, err := s.ProfileIssuerDefault(ctx, "default", "new"); err != nil || ok {
		t.Fatalf("second ProfileIssuerDefault = %v, %v; want false: the profile names one", ok, err)
	}
	chains, err := s.IssuerChains(ctx, "old")
	if err != nil || len(chains) != 2 || string(chains[0]) != "alt-1" {
		t.Fatalf("IssuerChains = %q, %v", chains, err)
	}
	a := newAccount(t, s)
	if err := issueAs(t, s, readyOrder(t, s, a, "rot.example.com"), "0c01", "old"); err != nil {
		t.Fatal(err)
	}
	_, err = s.IssuerRetire(ctx, "old", ev)
	wantErr(t, "retiring an issuer a profile names", err, store.ErrConflict)
	_, err = s.IssuerRotate(ctx, "default", []string{"missing"}, ev)
	wantErr(t, "rotating to an unknown issuer", err, store.ErrNotFound)
	retiring, err := s.IssuerRotate(ctx, "default", []string{"new"}, ev)
	if err != nil || !slices.Equal(retiring, []string{"old"}) {
		t.Fatalf("IssuerRotate = %v, %v; want [old] retiring", retiring, err)
	}
	m, err := s.ProfileIssuers(ctx)
	if err != nil || len(m["default"]) != 1 || m["default"][0].ID != "new" {
		t.Fatalf("ProfileIssuers = %+v, %v; want default: [new]", m, err)
	}
	_, err = s.IssuerRotate(ctx, "default", []string{"old"}, ev)
	wantErr(t, "rotating back to a retiring issuer", err, store.ErrConflict)
	recs, err := s.IssuerRecordsList(ctx)
	if err != nil || len(recs) != 2 {
		t.Fatalf("IssuerRecordsList = %+v, %v", recs, err)
	}
	for _, r := range recs {
		switch r.ID {
		case "old":
			if r.State != store.IssuerRetiring || r.Outstanding != 1 || len(r.Profiles) != 0 || len(r.Chains) != 2 {
				t.Fatalf("old = %+v; want retiring, 1 outstanding, no profile", r)
			}
		case "new":
			if r.State != store.IssuerActive || r.Outstanding != 0 || !slices.Equal(r.Profiles, []string{"default"}) {
				t.Fatalf("new = %+v; want active for default", r)
			}
		}
	}
	_, err = s.IssuerRetire(ctx, "old", ev)
	wantErr(t, "retiring an issuer with a live certificate", err, store.ErrConflict)
	// A re-publish (a worker's restart) keeps the state.
	if err := s.IssuerRecordPut(ctx, store.IssuerRecord{ID: "old", Name: "Old CA", KeyType: "p256", NotAfter: now.Add(time.Hour)}, []byte{0x30, 0x00}, nil); err != nil {
		t.Fatal(err)
	}
	if recs, _ := s.IssuerRecordsList(ctx); recs[0].State == store.IssuerActive && recs[0].ID == "old" || recs[1].ID == "old" && recs[1].State != store.IssuerRetiring {
		t.Fatalf("a re-publish moved the state: %+v", recs)
	}
	if chains, _ := s.IssuerChains(ctx, "old"); len(chains) != 0 {
		t.Fatalf("chains after a re-publish without any: %q", chains)
	}
}

// testIssuerKeyPlace: a record keeps where its issuer's key is (a pkcs11
// backend, the key's label and id; migration 0028), and a profile's
// issuers carry it, which a worker signs by.
func testIssuerKeyPlace(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	now := dbNow(t, s)
	for _, r := range []store.IssuerRecord{
		{ID: "0a", Name: "Local CA", KeyType: "p256", NotAfter: now.Add(time.Hour)},
		{ID: "0b", Name: "HSM CA", KeyType: "p384", NotAfter: now.Add(time.Hour), Backend: "softhsm", KeyLabel: "hallmark-issuer-01", KeyID: "68616c6c"},
	} {
		if err := s.IssuerRecordPut(ctx, r, []byte{0x30, 0x00}, nil); err != nil {
			t.Fatalf("IssuerRecordPut %s: %v", r.ID, err)
		}
	}
	if _, err := s.ProfileIssuerDefault(ctx, "hsm", "0b"); err != nil {
		t.Fatal(err)
	}
	recs, err := s.IssuerRecordsList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		switch r.ID {
		case "0a":
			if r.Backend != "" || r.KeyLabel != "" || r.KeyID != "" {
				t.Fatalf("the local issuer is listed with a key at %q %q %q", r.Backend, r.KeyLabel, r.KeyID)
			}
		case "0b":
			if r.Backend != "softhsm" || r.KeyLabel != "hallmark-issuer-01" || r.KeyID != "68616c6c" {
				t.Fatalf("the HSM issuer is listed with its key at %q %q %q", r.Backend, r.KeyLabel, r.KeyID)
			}
		}
	}
	m, err := s.ProfileIssuers(ctx)
	if err != nil || len(m["hsm"]) != 1 || m["hsm"][0].Backend != "softhsm" {
		t.Fatalf("ProfileIssuers = %+v, %v; want hsm: [0b on softhsm]", m, err)
	}
}
