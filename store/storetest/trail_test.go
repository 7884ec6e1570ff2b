package storetest

import (
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/origin"
	"github.com/hallmark-ca/hallmark/store"
)

// trailEvent is a trail event of action from a client, its request id rid.
func trailEvent(action, subject, rid string) store.AuditEvent {
	return store.AuditEvent{Actor: "acme:x", Action: action, Subject: subject, Detail: "d", Trail: true,
		Origin: origin.Origin{RequestID: rid, ClientAddr: "192.0.2.7", PTR: "host.example.net", UserAgent: "lego/4 (é)"}}
}

// trailOf is the trail events of request rid, newest first.
func trailOf(t *testing.T, s store.Store, rid string) []store.AuditEvent {
	t.Helper()
	evs, _, err := s.AuditFind(ctxT(t), store.AuditFilter{RequestID: rid}, store.Page{})
	if err != nil {
		t.Fatalf("AuditFind(request %s): %v", rid, err)
	}
	return evs
}

// testTrailWithItsRecord: each trail event commits with what it records,
// and with nothing when that does not commit.
func testTrailWithItsRecord(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	acctEv := trailEvent(store.ActionAccountCreated, "", "r-acct")
	key := &store.Account{KeyJWK: []byte(`{"kty":"OKP"}`), Thumbprint: rnd(32), Status: acme.StatusValid}
	a, err := s.AccountCreateTrailed(ctx, key, "", acctEv)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AccountCreateTrailed(ctx, key, "", trailEvent(store.ActionAccountCreated, "", "r-dup")); err == nil {
		t.Fatal("a second account for one key was created")
	}
	if got := trailOf(t, s, "r-acct"); len(got) != 1 || got[0].Subject != a.ID || got[0].Origin != acctEv.Origin || !got[0].Trail {
		t.Fatalf("account trail = %+v, want one event naming %s with its origin", got, a.ID)
	}
	if got := trailOf(t, s, "r-dup"); len(got) != 0 {
		t.Fatalf("a conflicting account left trail %+v", got)
	}

	o := readyOrder(t, s, a, "trail.example.com")
	if _, _, err := s.OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, o.Profile, []byte("csr"), nil); err != nil {
		t.Fatal(err)
	}
	now := dbNow(t, s)
	in := store.Issued{OrderID: o.ID, Trail: ptrTo(trailEvent(store.ActionCertificateIssued, "ee01", "r-issue")),
		Certificate: store.Certificate{Serial: "ee01", IssuerID: "issuer-1", DER: []byte{0x30, 0x01}, ChainPEM: []byte("x"),
			Names: []string{"trail.example.com"}, NotBefore: now, NotAfter: now.Add(time.Hour)}}
	if err := s.OrderIssued(ctx, in); err != nil {
		t.Fatal(err)
	}
	in.Certificate.Serial, in.Trail = "ee02", ptrTo(trailEvent(store.ActionCertificateIssued, "ee02", "r-again"))
	wantErr(t, "storing a second certificate", s.OrderIssued(ctx, in), store.ErrConflict)
	if got := trailOf(t, s, "r-issue"); len(got) != 1 || got[0].Action != store.ActionCertificateIssued {
		t.Fatalf("issuance trail = %+v", got)
	}
	if got := trailOf(t, s, "r-again"); len(got) != 0 {
		t.Fatalf("a certificate not stored left trail %+v", got)
	}

	o2 := newOrder(t, s, a, "fails.example.com")
	ch := authz(t, s, o2.AuthzIDs[0]).Challenges[0]
	if _, _, err := s.ChallengeClaim(ctx, store.SignedUse{}, ch.ID); err != nil {
		t.Fatal(err)
	}
	v := store.Verdict{ChallengeID: ch.ID, Status: acme.StatusInvalid, Error: &acme.Problem{Type: acme.ProblemConnection},
		Trail: ptrTo(trailEvent(store.ActionValidationFailed, ch.ID, "r-val"))}
	if err := s.ChallengeVerdict(ctx, v); err != nil {
		t.Fatal(err)
	}
	v.Trail = ptrTo(trailEvent(store.ActionValidationFailed, ch.ID, "r-late"))
	wantErr(t, "a second verdict", s.ChallengeVerdict(ctx, v), store.ErrConflict)
	if n, m := len(trailOf(t, s, "r-val")), len(trailOf(t, s, "r-late")); n != 1 || m != 0 {
		t.Fatalf("validation trail: %d events of the verdict, %d of the lost one; want 1 and 0", n, m)
	}

	o3 := readyOrder(t, s, a, "refused.example.com")
	fail := acme.Problem{Type: acme.ProblemBadCSR}
	wantErr(t, "failing a ready order", s.OrderFailTrailed(ctx, o3.ID, fail, trailEvent(store.ActionOrderInvalid, o3.ID, "r-early")), store.ErrConflict)
	if _, _, err := s.OrderFinalizeBegin(ctx, store.SignedUse{}, o3.ID, o3.Profile, []byte("csr"), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.OrderFailTrailed(ctx, o3.ID, fail, trailEvent(store.ActionOrderInvalid, o3.ID, "r-fail")); err != nil {
		t.Fatal(err)
	}
	if n, m := len(trailOf(t, s, "r-fail")), len(trailOf(t, s, "r-early")); n != 1 || m != 0 || order(t, s, o3.ID).Status != acme.StatusInvalid {
		t.Fatalf("order failure trail: %d events, %d of the refused failure; want 1 and 0", n, m)
	}
}

func ptrTo[T any](v T) *T { return &v }

// testTrailFindAndPrune: the filters, and pruning deletes old trail
// events only, oldest first, never an operator's.
func testTrailFindAndPrune(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	old := dbNow(t, s).Add(-48 * time.Hour)
	for i, ev := range []store.AuditEvent{
		{Actor: "cli:alice", Action: "revoke", Subject: "op-old", At: old},
		withAt(trailEvent(store.ActionCertificateIssued, "old1", "r1"), old),
		withAt(trailEvent(store.ActionOrderRefused, "old2", "r2"), old.Add(time.Second)),
		trailEvent(store.ActionCertificateIssued, "new1", "r3"),
		{Actor: "admin:bob", Action: "revoke", Subject: "op-new"},
	} {
		if err := s.AuditRecord(ctx, ev); err != nil {
			t.Fatalf("recording event %d: %v", i, err)
		}
	}
	yes, no := true, false
	for _, tc := range []struct {
		name string
		f    store.AuditFilter
		want []string
	}{
		{"all", store.AuditFilter{}, []string{"op-new", "new1", "old2", "old1", "op-old"}},
		{"trail", store.AuditFilter{Trail: &yes}, []string{"new1", "old2", "old1"}},
		{"operators", store.AuditFilter{Trail: &no}, []string{"op-new", "op-old"}},
		{"action", store.AuditFilter{Action: store.ActionCertificateIssued}, []string{"new1", "old1"}},
		{"since", store.AuditFilter{Since: old.Add(time.Hour)}, []string{"op-new", "new1"}},
		{"request", store.AuditFilter{RequestID: "r2"}, []string{"old2"}},
		{"unstorable", store.AuditFilter{Action: "a\x00"}, nil},
	} {
		evs, _, err := s.AuditFind(ctx, tc.f, store.Page{})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := subjects(evs); !equal(got, tc.want) {
			t.Errorf("AuditFind(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
	if n, err := s.AuditPrune(ctx, old.Add(time.Hour), 1); err != nil || n != 1 {
		t.Fatalf("pruning one: %d, %v", n, err)
	}
	if n, err := s.AuditPrune(ctx, old.Add(time.Hour), 100); err != nil || n != 1 {
		t.Fatalf("pruning the rest: %d, %v", n, err)
	}
	evs, _, err := s.AuditList(ctx, store.Page{})
	if got := subjects(evs); err != nil || !equal(got, []string{"trail", "trail", "op-new", "new1", "op-old"}) {
		t.Fatalf("after pruning: %v %v; want each pruning's record, the operators' events and the new trail event", got, err)
	}
}

func withAt(ev store.AuditEvent, at time.Time) store.AuditEvent { ev.At = at; return ev }

func subjects(evs []store.AuditEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Subject)
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// testJobCarriesOrigin: a job queued under a request's context carries
// the request's origin in its metadata; one queued without, none.
func testJobCarriesOrigin(t *testing.T, s store.Store, x Extras) {
	a := newAccount(t, s)
	o := newOrder(t, s, a, "origin.example.com", "plain.example.com")
	o1 := origin.Origin{RequestID: "req-origin-1", ClientAddr: "192.0.2.9", UserAgent: "ua"}
	with := origin.NewContext(ctxT(t), &o1)
	first, second := authz(t, s, o.AuthzIDs[0]).Challenges[0], authz(t, s, o.AuthzIDs[1]).Challenges[0]
	if _, claimed, err := s.ChallengeClaim(with, store.SignedUse{}, first.ID); err != nil || !claimed {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	if _, claimed, err := s.ChallengeClaim(ctxT(t), store.SignedUse{}, second.ID); err != nil || !claimed {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	carrying := "SELECT count(*) FROM river_job WHERE kind = '" + jobs.KindChallengeValidate + "' AND CAST(metadata AS text) LIKE '%req-origin-1%' AND CAST(metadata AS text) LIKE '%192.0.2.9%'"
	if n := x.Int(t, carrying); n != 1 {
		t.Fatalf("%d challenge_validate jobs carry the request's origin, want 1", n)
	}
	if n := x.Int(t, "SELECT count(*) FROM river_job WHERE kind = '"+jobs.KindChallengeValidate+"' AND CAST(metadata AS text) LIKE '%origin%'"); n != 1 {
		t.Fatalf("%d challenge_validate jobs carry an origin, want only the request's", n)
	}
}
