package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// testRenewalMove: selectors pick the right live certificates; a move
// replaces an earlier one; an unmoved certificate has no window.
func testRenewalMove(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a, b := newAccount(t, s), newAccount(t, s)
	serials := []string{"a1" + rnd(4), "a2" + rnd(4), "b1" + rnd(4)}
	for i, acct := range []*store.Account{a, a, b} {
		mustIssue(t, s, readyOrder(t, s, acct, "ari.example.com"), serials[i])
	}
	if _, err := s.Revoke(ctx, serials[1], 1, store.AuditEvent{Actor: "cli:test", Action: "revoke", Subject: serials[1]}); err != nil {
		t.Fatal(err)
	}
	_, err := s.RenewalWindowBySerial(ctx, serials[0])
	wantErr(t, "RenewalWindowBySerial before a move", err, store.ErrNotFound)

	now := dbNow(t, s)
	ev := store.AuditEvent{Actor: "cli:test", Action: "ari.move"}
	moved, err := s.RenewalMove(ctx, store.RenewalSelector{AccountID: a.ID}, now.Add(-2*time.Hour), now.Add(-time.Hour), "first", ev)
	if err != nil || !slices.Equal(moved, []string{serials[0]}) {
		t.Fatalf("move by account = %v, %v; want only the live certificate %s", moved, err, serials[0])
	}
	moved, err = s.RenewalMove(ctx, store.RenewalSelector{IssuerID: "issuer-1", Profile: "default"}, now.Add(-time.Hour), now, "second", ev)
	if err != nil || len(moved) != 2 {
		t.Fatalf("move by issuer and profile = %v, %v; want 2", moved, err)
	}
	w, err := s.RenewalWindowBySerial(ctx, serials[0])
	if err != nil || w.Reason != "second" || w.Actor != "cli:test" || w.End.Sub(now).Abs() > time.Second {
		t.Fatalf("window after the second move = %+v, %v", w, err)
	}
	if _, err := s.RenewalMove(ctx, store.RenewalSelector{}, now, now.Add(time.Hour), "all", ev); err == nil {
		t.Errorf("an empty selector moved certificates")
	}
	evs, _, _ := s.AuditList(ctx, store.Page{Limit: 50})
	n := 0
	for _, e := range evs {
		if e.Action == "ari.move" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d ari.move audit events, want 2", n)
	}
}

// testOrderReplaces: OrderCreate marks the replaced certificate; a second
// replacement conflicts until the first replacing order is invalid.
func testOrderReplaces(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a, other := newAccount(t, s), newAccount(t, s)
	serial := "r" + rnd(6)
	mustIssue(t, s, readyOrder(t, s, a, "r.example.com"), serial)
	spec := orderSpec(t, s, other, "r.example.com")
	spec.Replaces, spec.ReplacesSerial = "cert-id", serial
	_, err := s.OrderCreate(ctx, store.SignedUse{}, spec)
	wantErr(t, "replacing another account's certificate", err, store.ErrNotFound)

	spec = orderSpec(t, s, a, "r.example.com")
	spec.Replaces, spec.ReplacesSerial = "cert-id", serial
	o, err := s.OrderCreate(ctx, store.SignedUse{}, spec)
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := s.CertificateBySerial(ctx, serial); c.ReplacedBy != o.ID || o.Replaces != "cert-id" {
		t.Fatalf("ReplacedBy = %q, order replaces %q", c.ReplacedBy, o.Replaces)
	}
	_, err = s.OrderCreate(ctx, store.SignedUse{}, spec)
	wantErr(t, "replacing twice", err, store.ErrConflict)
	if _, err := s.AuthzDeactivate(ctx, o.AuthzIDs[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OrderCreate(ctx, store.SignedUse{}, spec); err != nil {
		t.Errorf("replacing after the first replacement failed: %v", err)
	}
}

// testEABBindOnce: a key binds one account, atomically with creating it.
// Creating a key records its audit event in the same transaction; a
// refused one records none. An unused key can be deleted; a bound one not.
func testEABBindOnce(t *testing.T, s store.Store, _ Extras) {
	k, bound := eabBoundOnce(t, s)
	eabDeleted(t, s, k, bound)
}

// auditLog is the newest 100 events of s's audit log.
func auditLog(t *testing.T, s store.Store) []store.AuditEvent {
	t.Helper()
	evs, _, err := s.AuditList(ctxT(t), store.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// eabBoundOnce: a key created with its audit event binds one account, and
// only one; it returns the key and the account it bound.
func eabBoundOnce(t *testing.T, s store.Store) (*store.EABKey, *store.Account) {
	ctx := ctxT(t)
	before := len(auditLog(t, s))
	id := "k-" + rnd(4)
	k, err := s.EABCreate(ctx, store.EABKey{ID: id, MACKey: []byte("secret-mac-key-0123456789abcdef"), Label: "team",
		AllowedDomains: []string{"team.example"}, PreValidated: true},
		store.AuditEvent{Actor: "cli:test", Action: "eab.create", Subject: id, Detail: "label \"team\""})
	if err != nil || !k.PreValidated || k.AccountID != "" || !slices.Equal(k.AllowedDomains, []string{"team.example"}) {
		t.Fatalf("EABCreate = %+v, %v", k, err)
	}
	if evs := auditLog(t, s); len(evs) != before+1 || evs[0].Action != "eab.create" || evs[0].Subject != id {
		t.Errorf("after EABCreate the audit log holds %d events (was %d), newest %+v; want its eab.create", len(evs), before, evs[0])
	}
	_, err = s.EABCreate(ctx, store.EABKey{ID: k.ID, MACKey: []byte("x")}, store.AuditEvent{Actor: "cli:test", Action: "eab.create", Subject: k.ID})
	wantErr(t, "EABCreate twice", err, store.ErrConflict)
	if n := len(auditLog(t, s)); n != before+1 {
		t.Errorf("the refused EABCreate left an audit event: %d events, want %d", n, before+1)
	}

	acct := &store.Account{KeyJWK: []byte(`{"kty":"OKP"}`), Thumbprint: rnd(32), TermsAgreed: true}
	got, err := s.AccountCreateBound(ctx, acct, k.ID)
	if err != nil {
		t.Fatal(err)
	}
	if kb, err := s.AccountEAB(ctx, got.ID); err != nil || kb.ID != k.ID || kb.BoundAt == nil {
		t.Fatalf("AccountEAB = %+v, %v", kb, err)
	}
	second := &store.Account{KeyJWK: []byte(`{"kty":"OKP"}`), Thumbprint: rnd(32)}
	out, err := s.AccountCreateBound(ctx, second, k.ID)
	wantErr(t, "binding a key twice", err, store.ErrConflict)
	if out != nil {
		t.Errorf("binding twice returned account %+v", out)
	}
	if _, err := s.AccountByThumbprint(ctx, second.Thumbprint); err == nil {
		t.Errorf("the refused binding left an account behind")
	}
	_, err = s.AccountCreateBound(ctx, second, "no-such-key")
	wantErr(t, "binding a missing key", err, store.ErrNotFound)
	_, err = s.AccountEAB(ctx, newAccount(t, s).ID)
	wantErr(t, "AccountEAB of an unbound account", err, store.ErrNotFound)
	keys, _, err := s.EABList(ctx, store.Page{Limit: 10})
	if err != nil || len(keys) != 1 || keys[0].AccountID != got.ID {
		t.Errorf("EABList = %+v, %v", keys, err)
	}
	return k, got
}

// eabDeleted: a bound key stays (its limits are its account's), with no
// audit event; an unused one goes, audited, and can bind nothing.
func eabDeleted(t *testing.T, s store.Store, k *store.EABKey, got *store.Account) {
	ctx := ctxT(t)
	before := len(auditLog(t, s))
	del := func(id string) error {
		return s.EABDelete(ctx, id, store.AuditEvent{Actor: "cli:test", Action: "eab.delete", Subject: id})
	}
	wantErr(t, "deleting a bound key", del(k.ID), store.ErrConflict)
	if kb, err := s.AccountEAB(ctx, got.ID); err != nil || kb.ID != k.ID {
		t.Errorf("after refusing to delete it, AccountEAB = %+v, %v", kb, err)
	}
	wantErr(t, "deleting a missing key", del("no-such-key"), store.ErrNotFound)
	if n := len(auditLog(t, s)); n != before {
		t.Errorf("refused deletions left %d audit events", n-before)
	}
	unused := "k-" + rnd(4)
	if _, err := s.EABCreate(ctx, store.EABKey{ID: unused, MACKey: []byte("another-mac-key-0123456789abcdef")},
		store.AuditEvent{Actor: "cli:test", Action: "eab.create", Subject: unused}); err != nil {
		t.Fatal(err)
	}
	if err := del(unused); err != nil {
		t.Fatalf("deleting an unused key: %v", err)
	}
	if evs := auditLog(t, s); evs[0].Action != "eab.delete" || evs[0].Subject != unused {
		t.Errorf("newest audit event after the deletion: %+v, want its eab.delete", evs[0])
	}
	_, err := s.EABByID(ctx, unused)
	wantErr(t, "reading a deleted key", err, store.ErrNotFound)
	_, err = s.AccountCreateBound(ctx, &store.Account{KeyJWK: []byte(`{"kty":"OKP"}`), Thumbprint: rnd(32)}, unused)
	wantErr(t, "binding a deleted key", err, store.ErrNotFound)
}

// testAuthzCreate: a standalone authorization, reusable by a later order.
func testAuthzCreate(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	now := dbNow(t, s)
	az, err := s.AuthzCreate(ctx, &store.Authorization{AccountID: a.ID, Identifier: acme.Identifier{Type: acme.IdentifierDNS, Value: "pre.example.com"},
		Expires: now.Add(time.Hour), Challenges: []store.Challenge{{Type: acme.ChallengeHTTP01}}}, store.OrderLimits{})
	if err != nil || az.Status != acme.StatusPending || len(az.Challenges) != 1 {
		t.Fatalf("AuthzCreate = %+v, %v", az, err)
	}
	validate(t, s, az.ID, acme.StatusValid)
	re, err := reusable(ctx, s, a.ID, az.Identifier, false, now.Add(time.Minute))
	if err != nil || re.ID != az.ID {
		t.Errorf("AuthzReusable = %+v, %v; want %s", re, err, az.ID)
	}
}
