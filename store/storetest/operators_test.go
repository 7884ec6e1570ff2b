package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/store"
)

// testOperators: an operator is found by their certificate's hash until
// revoked; adding and revoking are audited with the change, and a refused
// add or revoke leaves no row.
func testOperators(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	exp := dbNow(t, s).Add(24 * time.Hour)
	ev := func(action, name string) store.AuditEvent {
		return store.AuditEvent{Actor: "cli:root", Action: action, Subject: name}
	}
	alice := store.Operator{Name: "alice", Role: store.RoleOperator, CertSHA256: "aa01", NotAfter: exp}
	if err := s.OperatorAdd(ctx, alice, ev("operator.add", "alice")); err != nil {
		t.Fatal(err)
	}
	dup := store.Operator{Name: "mallory", Role: store.RoleAdmin, CertSHA256: "aa01", NotAfter: exp}
	if err := s.OperatorAdd(ctx, dup, ev("operator.add", "mallory")); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a second operator with alice's certificate: %v, want ErrConflict", err)
	}
	got, err := s.OperatorByCert(ctx, "aa01")
	if err != nil || got.Name != "alice" || got.Role != store.RoleOperator || got.RevokedAt != nil || !got.NotAfter.Equal(exp.Truncate(time.Microsecond)) {
		t.Fatalf("OperatorByCert = %+v, %v", got, err)
	}
	if _, err := s.OperatorByCert(ctx, "ffff"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("OperatorByCert(unknown) = %v, want ErrNotFound", err)
	}
	if err := s.OperatorRevoke(ctx, "alice", ev("operator.revoke", "alice")); err != nil {
		t.Fatal(err)
	}
	if err := s.OperatorRevoke(ctx, "alice", ev("operator.revoke", "alice")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoking twice: %v, want ErrNotFound", err)
	}
	if got, err := s.OperatorByCert(ctx, "aa01"); err != nil || got.RevokedAt == nil {
		t.Fatalf("after revoking: %+v, %v; want revoked", got, err)
	}
	if n := x.Int(t, "SELECT count(*) FROM audit_events WHERE action LIKE 'operator.%'"); n != 2 {
		t.Fatalf("operator audit rows = %d, want 2 (one add, one revoke)", n)
	}
	if list, err := s.OperatorsList(ctx); err != nil || len(list) != 1 {
		t.Fatalf("OperatorsList = %+v, %v", list, err)
	}
	if !store.RoleAllows(store.RoleAdmin, store.RoleOperator) || store.RoleAllows(store.RoleViewer, store.RoleOperator) || store.RoleAllows("root", store.RoleViewer) {
		t.Fatal("RoleAllows ranks roles wrongly")
	}
}
