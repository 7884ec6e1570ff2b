package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

func testAccountLifecycle(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	if a.ID == "" || len(a.ID) < 22 || a.Status != acme.StatusValid || !a.TermsAgreed || a.CreatedAt.IsZero() {
		t.Fatalf("created account = %+v", a)
	}
	got, err := s.AccountByThumbprint(ctx, a.Thumbprint)
	if err != nil || got.ID != a.ID || string(got.KeyJWK) != string(a.KeyJWK) {
		t.Fatalf("AccountByThumbprint = %+v, %v", got, err)
	}
	up, err := s.AccountUpdate(ctx, a.ID, []string{"mailto:a@example.com", "mailto:b@example.com"})
	if err != nil || !slices.Equal(up.Contact, []string{"mailto:a@example.com", "mailto:b@example.com"}) {
		t.Fatalf("AccountUpdate = %+v, %v", up, err)
	}
	// Key change is a compare-and-swap on the current thumbprint.
	ch, err := s.AccountKeyChange(ctx, a.ID, a.Thumbprint, []byte(`{"kty":"new"}`), "new-thumb")
	if err != nil || ch.Thumbprint != "new-thumb" || string(ch.KeyJWK) != `{"kty":"new"}` {
		t.Fatalf("AccountKeyChange = %+v, %v", ch, err)
	}
	_, err = s.AccountKeyChange(ctx, a.ID, a.Thumbprint, []byte(`{"kty":"again"}`), "again")
	wantErr(t, "key change from a stale thumbprint", err, store.ErrConflict)
	other := newAccount(t, s)
	_, err = s.AccountKeyChange(ctx, a.ID, "new-thumb", []byte(`{}`), other.Thumbprint)
	wantErr(t, "key change to another account's key", err, store.ErrConflict)
	if _, err := s.AccountByThumbprint(ctx, a.Thumbprint); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the old key still finds the account: %v", err)
	}
	// The replaced keys are kept, once each, for dns-persist-01's hashed
	// account URIs; a lost swap keeps nothing.
	if _, err := s.AccountKeyChange(ctx, a.ID, "new-thumb", []byte(`{"kty":"third"}`), "third-thumb"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AccountKeyChange(ctx, a.ID, "third-thumb", []byte(`{"kty":"new"}`), "new-thumb"); err != nil {
		t.Fatal(err)
	}
	prior, err := s.AccountPriorThumbprints(ctx, a.ID)
	slices.Sort(prior)
	want := []string{a.Thumbprint, "new-thumb", "third-thumb"}
	slices.Sort(want)
	if err != nil || !slices.Equal(prior, want) {
		t.Fatalf("AccountPriorThumbprints = %v, %v; want %v", prior, err, want)
	}
	if prior, err := s.AccountPriorThumbprints(ctx, other.ID); err != nil || len(prior) != 0 {
		t.Fatalf("AccountPriorThumbprints of an account that never changed its key = %v, %v", prior, err)
	}
}

func testAccountThumbprintUnique(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	dup, err := x.Open(t, nil).AccountCreate(ctx, &store.Account{KeyJWK: []byte(`{}`), Thumbprint: a.Thumbprint})
	wantErr(t, "second account with one thumbprint", err, store.ErrConflict)
	if dup == nil || dup.ID != a.ID {
		t.Fatalf("conflicting AccountCreate returned %+v, want the existing account %s", dup, a.ID)
	}
}

func testAccountDeactivate(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	ready := readyOrder(t, s, a, "ready.example.com")
	pending := newOrder(t, s, a, "pending.example.com")
	// One being signed: the worker must find it no longer processing.
	processing := readyOrder(t, s, a, "processing.example.com")
	if _, claimed, err := s.OrderFinalizeBegin(ctx, store.SignedUse{}, processing.ID, processing.Profile, []byte("csr-der"), nil); err != nil || !claimed {
		t.Fatalf("OrderFinalizeBegin = %v, %v", claimed, err)
	}
	d, err := s.AccountDeactivate(ctx, a.ID)
	if err != nil || d.Status != acme.StatusDeactivated {
		t.Fatalf("AccountDeactivate = %+v, %v", d, err)
	}
	for _, id := range append(ready.AuthzIDs, pending.AuthzIDs...) {
		if st := authz(t, s, id).Status; st != acme.StatusDeactivated {
			t.Errorf("authorization %s is %s after its account was deactivated, want deactivated (RFC 8555 §7.3.6)", id, st)
		}
	}
	for _, o := range []*store.Order{ready, pending, processing} {
		if got := order(t, s, o.ID); got.Status != acme.StatusInvalid || got.Error == nil {
			t.Errorf("order %s is %s (error %v) after its account was deactivated, want invalid with a problem", o.ID, got.Status, got.Error)
		}
	}
	// Again: nothing left to move, the account is returned as it is.
	if d, err := s.AccountDeactivate(ctx, a.ID); err != nil || d.Status != acme.StatusDeactivated {
		t.Fatalf("second AccountDeactivate = %+v, %v", d, err)
	}
}

func testAccountsListPages(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	var want []string
	for range 5 {
		want = append([]string{newAccount(t, s).ID}, want...) // newest first
	}
	var got []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		list, next, err := s.AccountsList(ctx, store.Page{After: after, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) > 2 {
			t.Fatalf("page has %d accounts, limit 2", len(list))
		}
		for _, a := range list {
			got = append(got, a.ID)
		}
		if next == "" {
			break
		}
		after = next
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages gave %v, want newest first %v", got, want)
	}
	for _, after := range []string{"garbage", "0", "-5", "1\x00"} {
		_, _, err := s.AccountsList(ctx, store.Page{After: after})
		wantErr(t, fmt.Sprintf("a cursor of %q", after), err, store.ErrBadCursor)
	}
}
