package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/store"
)

// testAdminSessions: a session is live from its creation until it is ended
// or expires on the database's clock, another handle (another frontend
// replica) sees the same, and a sign-in sweeps the expired rows.
func testAdminSessions(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	signIn := func(u string) store.AuditEvent {
		return store.AuditEvent{Actor: "admin:" + u, Action: "admin.login", Subject: u}
	}
	signOut := func(u string) store.AuditEvent {
		return store.AuditEvent{Actor: "admin:" + u, Action: "admin.logout", Subject: u}
	}
	other := x.Open(t, nil)
	if _, err := s.AdminSessionOperator(ctx, "never"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("AdminSessionOperator of an unknown id: %v, want ErrNotFound", err)
	}
	if err := s.AdminSessionCreate(ctx, "alice-1", "alice", time.Hour, signIn("alice")); err != nil {
		t.Fatal(err)
	}
	if err := s.AdminSessionCreate(ctx, "alice-1", "mallory", time.Hour, signIn("mallory")); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a second session with the same id: %v, want ErrConflict", err)
	}
	// The sign-in is recorded with its session, and only with it.
	if n := x.Int(t, "SELECT count(*) FROM audit_events WHERE action = 'admin.login' AND subject = 'alice'"); n != 1 {
		t.Fatalf("sign-ins of alice recorded: %d, want 1", n)
	}
	if n := x.Int(t, "SELECT count(*) FROM audit_events WHERE subject = 'mallory'"); n != 0 {
		t.Fatalf("a refused session recorded %d sign-ins, want none", n)
	}
	for name, st := range map[string]store.Store{"this handle": s, "another handle": other} {
		if op, err := st.AdminSessionOperator(ctx, "alice-1"); err != nil || op != "alice" {
			t.Fatalf("%s: AdminSessionOperator = %q, %v; want alice", name, op, err)
		}
	}

	// Ended on one replica, gone on every one; ending it again is no error.
	if err := other.AdminSessionEnd(ctx, "alice-1", signOut("alice")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AdminSessionOperator(ctx, "alice-1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an ended session: %v, want ErrNotFound", err)
	}
	if err := s.AdminSessionEnd(ctx, "alice-1", signOut("alice")); err != nil {
		t.Fatalf("ending an ended session: %v", err)
	}

	// A session whose expiry has passed (created already expired: time is
	// moved, not waited for) is not live, and the next sign-in removes it.
	if err := s.AdminSessionCreate(ctx, "bob-1", "bob", -time.Second, signIn("bob")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AdminSessionOperator(ctx, "bob-1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an expired session: %v, want ErrNotFound", err)
	}
	if n := x.Int(t, "SELECT count(*) FROM admin_sessions WHERE id = 'bob-1'"); n != 1 {
		t.Fatalf("expired rows before a sign-in: %d, want 1", n)
	}
	if err := s.AdminSessionCreate(ctx, "carol-1", "carol", time.Hour, signIn("carol")); err != nil {
		t.Fatal(err)
	}
	if n := x.Int(t, "SELECT count(*) FROM admin_sessions"); n != 1 {
		t.Fatalf("rows after a sign-in: %d, want 1 (the expired one removed)", n)
	}
	if op, err := s.AdminSessionOperator(ctx, "carol-1"); err != nil || op != "carol" {
		t.Fatalf("AdminSessionOperator = %q, %v; want carol", op, err)
	}
}
