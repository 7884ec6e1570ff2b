package operator_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/admin/operator"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/protocol/revocation"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// atomicAction is one audited action: do performs it as actor, changed
// reports whether its change is in the store, and action is the audit
// action it records.
type atomicAction struct {
	name, action string
	do           func(actor string) error
	changed      func() bool
}

// TestMoreActionsAuditedAtomically is TestActionsAuditedAtomically for the
// other audited actions: revoke, EAB key create and delete, operator add
// and revoke, pause lift, key block and unblock, ARI move. Each, refused
// its audit row by the database, leaves neither its change nor a row;
// committed, it has both, and the chain verifies.
func TestMoreActionsAuditedAtomically(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			url := testdb.SQLite(t)
			if dialect == "postgres" {
				url = testdb.Postgres(t)
			}
			db := testdb.OpenURL(t, url)
			execSQL(t, url, faultSQL[dialect])
			st := db.Store
			for _, a := range actions(t, st) {
				if err := a.do("admin:faulty"); err == nil || !strings.Contains(err.Error(), "injected fault") {
					t.Errorf("%s with a fault = %v, want the fault", a.name, err)
				}
				if a.changed() {
					t.Errorf("%s failed and its change was kept", a.name)
				}
				if n := auditRows(t, st, a.action); n != 0 {
					t.Errorf("%s failed and left %d %s audit rows", a.name, n, a.action)
				}
				if err := a.do("admin:alice"); err != nil {
					t.Fatalf("%s: %v", a.name, err)
				}
				if !a.changed() {
					t.Errorf("%s committed without its change", a.name)
				}
				if evs := auditOf(t, st, a.action); len(evs) != 1 || evs[0].Actor != "admin:alice" {
					t.Errorf("%s committed: audit rows %+v, want one by admin:alice", a.name, evs)
				}
			}
			if rep, err := store.VerifyAudit(ctx, st); err != nil || rep.Break != nil {
				t.Fatalf("VerifyAudit = %+v, %v", rep, err)
			}
		})
	}
}

// actions are the audited actions TestMoreActionsAuditedAtomically
// performs, each on its own records, in an order where each finds what it
// acts on (the EAB key it deletes, the operator it revokes, the key it
// unblocks).
func actions(t *testing.T, st store.Store) []atomicAction {
	ctx := context.Background()
	rev := revocation.New(st, map[string]profile.Profile{"default": profile.Default()})
	revokeSerial, ariSerial := issued(t, st, "at-revoke", "a70e01"), issued(t, st, "at-ari", "a7a101")
	paused := failedValidation(t, st, "at-pause")
	hour := time.Now().Add(time.Hour)
	key := store.KeyHash([]byte("a key reported compromised"))
	return []atomicAction{
		{"revoke", revocation.ActionRevoke, func(actor string) error {
			_, err := rev.Revoke(ctx, revocation.Request{Serial: revokeSerial, Reason: revocation.Superseded, Actor: actor, Via: "test"})
			return err
		}, func() bool { c, _ := st.CertificateBySerial(ctx, revokeSerial); return c.RevokedAt != nil }},
		{"EAB create", "eab.create", func(actor string) error {
			_, err := st.EABCreate(ctx, store.EABKey{ID: "eab_atomic", MACKey: make([]byte, 32)}, store.AuditEvent{Actor: actor, Action: "eab.create", Subject: "eab_atomic"})
			return err
		}, func() bool { _, err := st.EABByID(ctx, "eab_atomic"); return err == nil }},
		{"EAB delete", "eab.delete", func(actor string) error {
			return st.EABDelete(ctx, "eab_atomic", store.AuditEvent{Actor: actor, Action: "eab.delete", Subject: "eab_atomic"})
		}, func() bool { _, err := st.EABByID(ctx, "eab_atomic"); return errors.Is(err, store.ErrNotFound) }},
		{"operator add", "operator.add", func(actor string) error {
			return st.OperatorAdd(ctx, store.Operator{Name: "dora", Role: store.RoleViewer, CertSHA256: strings.Repeat("ab", 32), NotAfter: hour},
				store.AuditEvent{Actor: actor, Action: "operator.add", Subject: "dora"})
		}, func() bool { _, err := st.OperatorByCert(ctx, strings.Repeat("ab", 32)); return err == nil }},
		{"operator revoke", "operator.revoke", func(actor string) error {
			return st.OperatorRevoke(ctx, "dora", store.AuditEvent{Actor: actor, Action: "operator.revoke", Subject: "dora"})
		}, func() bool {
			o, _ := st.OperatorByCert(ctx, strings.Repeat("ab", 32))
			return o != nil && o.RevokedAt != nil
		}},
		{"pause lift", store.ActionPauseLifted, func(actor string) error {
			_, err := operator.LiftPause(ctx, st, paused, "", actor)
			return err
		}, func() bool {
			l, _, _ := st.PausesList(ctx, store.PauseRule{}, store.PauseFilter{AccountID: paused, All: true}, store.Page{})
			return len(l) == 0
		}},
		{"key block", store.ActionKeyBlock, func(actor string) error {
			_, err := st.KeyBlock(ctx, store.BlockedKey{SPKIHash: key, Why: "test", Actor: actor})
			return err
		}, func() bool { _, err := st.KeyBlockedBy(ctx, key); return err == nil }},
		{"key unblock", store.ActionKeyUnblock, func(actor string) error {
			return st.KeyUnblock(ctx, key, store.AuditEvent{Actor: actor, Action: store.ActionKeyUnblock, Subject: "k"})
		}, func() bool { _, err := st.KeyBlockedBy(ctx, key); return errors.Is(err, store.ErrNotFound) }},
		{"ARI move", operator.ActionARIMove, func(actor string) error {
			_, err := operator.MoveRenewal(ctx, st, store.RenewalSelector{Serial: ariSerial}, "drill", actor)
			return err
		}, func() bool { _, err := st.RenewalWindowBySerial(ctx, ariSerial); return err == nil }},
	}
}

func auditOf(t *testing.T, st store.Store, action string) []store.AuditEvent {
	t.Helper()
	evs, _, err := st.AuditFind(context.Background(), store.AuditFilter{Action: action}, store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func auditRows(t *testing.T, st store.Store, action string) int { return len(auditOf(t, st, action)) }

// orderFor is a new account's pending order for name.example.com.
func orderFor(t *testing.T, st store.Store, name string) (*store.Order, string) {
	t.Helper()
	ctx := context.Background()
	acct, err := st.AccountCreate(ctx, &store.Account{KeyJWK: []byte(`{"kty":"OKP","x":"` + name + `"}`), Thumbprint: name + "-thumb", TermsAgreed: true})
	if err != nil {
		t.Fatal(err)
	}
	now, err := st.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := acme.Identifier{Type: acme.IdentifierDNS, Value: name + ".example.com"}
	o, err := st.OrderCreate(ctx, store.SignedUse{}, store.NewOrder{AccountID: acct.ID, Profile: "default", Expires: now.Add(time.Hour), Identifiers: []acme.Identifier{id},
		Authzs: []*store.Authorization{{Identifier: id, Expires: now.Add(time.Hour), Challenges: []store.Challenge{{Type: acme.ChallengeHTTP01}}}}})
	if err != nil {
		t.Fatal(err)
	}
	az, err := st.AuthzByID(ctx, o.AuthzIDs[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.ChallengeClaim(ctx, store.SignedUse{}, az.Challenges[0].ID); err != nil || !ok {
		t.Fatalf("ChallengeClaim: %v %v", ok, err)
	}
	return o, az.Challenges[0].ID
}

// failedValidation is an account whose validation of name.example.com
// failed once: a run of failures PauseLift deletes.
func failedValidation(t *testing.T, st store.Store, name string) string {
	t.Helper()
	o, ch := orderFor(t, st, name)
	if err := st.ChallengeVerdict(context.Background(), store.Verdict{ChallengeID: ch, Status: acme.StatusInvalid,
		Error: &acme.Problem{Type: acme.ProblemUnauthorized, Detail: "test"}}); err != nil {
		t.Fatal(err)
	}
	return o.AccountID
}

// issued is a live certificate of a new account.
func issued(t *testing.T, st store.Store, name, serial string) string {
	t.Helper()
	ctx := context.Background()
	o, ch := orderFor(t, st, name)
	if err := st.ChallengeVerdict(ctx, store.Verdict{ChallengeID: ch, Status: acme.StatusValid}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, o.Profile, []byte("csr"), nil); err != nil || !ok {
		t.Fatalf("OrderFinalizeBegin: %v %v", ok, err)
	}
	now, err := st.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.OrderIssued(ctx, store.Issued{OrderID: o.ID, Certificate: store.Certificate{Serial: serial, IssuerID: "issuer-1", Profile: "default",
		DER: []byte{0x30, 0x01}, ChainPEM: []byte("-----BEGIN CERTIFICATE-----\n"), Names: []string{name + ".example.com"},
		NotBefore: now, NotAfter: now.Add(90 * 24 * time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	return serial
}
