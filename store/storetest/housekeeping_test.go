package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

func testExpirePending(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	past := dbNow(t, s).Add(-time.Second)
	spec := orderSpec(t, s, a, "expired.example.com")
	spec.Expires = past
	spec.Authzs[0].Expires = past
	old, err := s.OrderCreate(ctx, store.SignedUse{}, spec)
	if err != nil {
		t.Fatal(err)
	}
	live := newOrder(t, s, a, "live.example.com")
	n, err := s.ExpirePending(ctx)
	if err != nil || n != 2 {
		t.Fatalf("ExpirePending = %d, %v; want 2 (one authorization, one order)", n, err)
	}
	if st := authz(t, s, old.AuthzIDs[0]).Status; st != acme.StatusExpired {
		t.Errorf("expired authorization is %s, want expired", st)
	}
	if st := order(t, s, old.ID).Status; st != acme.StatusInvalid {
		t.Errorf("expired order is %s, want invalid (RFC 8555 §7.1.6)", st)
	}
	if st := order(t, s, live.ID).Status; st != acme.StatusPending {
		t.Errorf("live order is %s, want pending", st)
	}
	if n, err := s.ExpirePending(ctx); err != nil || n != 0 {
		t.Fatalf("second ExpirePending = %d, %v; want 0", n, err)
	}
}

func testStrandedChallenge(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	o := newOrder(t, s, a, "stranded.example.com")
	cid := authz(t, s, o.AuthzIDs[0]).Challenges[0].ID
	if _, claimed, err := s.ChallengeClaim(ctx, store.SignedUse{}, cid); err != nil || !claimed {
		t.Fatal(claimed, err)
	}
	later := dbNow(t, s).Add(time.Minute)
	stranded := func(olderThan time.Time) []jobs.Subject {
		t.Helper()
		subs, err := s.Stranded(ctx, olderThan)
		if err != nil {
			t.Fatal(err)
		}
		return subs
	}
	if subs := stranded(later); len(subs) != 0 {
		t.Fatalf("Stranded = %v while the job is queued, want none", subs)
	}
	x.Exec(t, "DELETE FROM river_job")
	want := []jobs.Subject{{Kind: jobs.KindChallengeValidate, ID: cid}}
	if subs := stranded(later); !slices.Equal(subs, want) {
		t.Fatalf("Stranded = %v after the job was lost, want %v", subs, want)
	}
	if subs := stranded(dbNow(t, s).Add(-time.Minute)); len(subs) != 0 {
		t.Fatalf("Stranded with olderThan before the claim = %v, want none", subs)
	}
	if err := s.Requeue(ctx, want[0]); err != nil {
		t.Fatal(err)
	}
	if n := jobCount(t, x, jobs.KindChallengeValidate); n != 1 {
		t.Fatalf("%d challenge_validate jobs after Requeue, want 1", n)
	}
	if subs := stranded(later); len(subs) != 0 {
		t.Fatalf("Stranded = %v after Requeue, want none", subs)
	}
	if moved, err := s.Abandon(ctx, want[0], acme.Problem{Detail: "validation could not run"}); err != nil || !moved {
		t.Fatalf("Abandon of a processing challenge = %v, %v; want true", moved, err)
	}
	c := challenge(t, s, cid)
	if c.Status != acme.StatusInvalid || c.Error == nil || c.Error.Type != acme.ProblemServerInternal {
		t.Fatalf("abandoned challenge = %s %+v, want invalid with serverInternal", c.Status, c.Error)
	}
	if st := order(t, s, o.ID).Status; st != acme.StatusInvalid {
		t.Fatalf("order of an abandoned challenge is %s, want invalid", st)
	}
	// Abandoning a subject that already has its verdict changes nothing,
	// and says so.
	if moved, err := s.Abandon(ctx, want[0], acme.Problem{Detail: "again"}); err != nil || moved {
		t.Fatalf("abandoning twice = %v, %v; want false, nil (nothing left to abandon)", moved, err)
	}
	if c := challenge(t, s, cid); c.Error == nil || c.Error.Detail != "validation could not run" {
		t.Fatalf("a second Abandon rewrote the problem to %+v", c.Error)
	}
	wantErr(t, "requeueing a finished challenge", s.Requeue(ctx, want[0]), store.ErrConflict)
}

func testStrandedOrder(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	spec := orderSpec(t, s, a, "stranded-order.example.com")
	spec.Profile = "hsm"
	o, err := s.OrderCreate(ctx, store.SignedUse{}, spec)
	if err != nil {
		t.Fatal(err)
	}
	validate(t, s, o.AuthzIDs[0], acme.StatusValid)
	if _, claimed, err := s.OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, o.Profile, []byte("csr"), nil); err != nil || !claimed {
		t.Fatal(claimed, err)
	}
	x.Exec(t, "DELETE FROM river_job")
	subs, err := s.Stranded(ctx, dbNow(t, s).Add(time.Minute))
	want := []jobs.Subject{{Kind: jobs.KindSignerIssue, ID: o.ID}}
	if err != nil || !slices.Equal(subs, want) {
		t.Fatalf("Stranded = %v, %v; want %v", subs, err, want)
	}
	if err := s.Requeue(ctx, want[0]); err != nil {
		t.Fatal(err)
	}
	// The requeued job goes to the queue of the order's profile.
	if n := x.Int(t, "SELECT count(*) FROM river_job WHERE kind = 'signer_issue' AND queue = '"+jobs.ProfileQueue("hsm")+"'"); n != 1 {
		t.Fatalf("%d signer_issue jobs on the hsm profile's queue after Requeue, want 1", n)
	}
	if moved, err := s.Abandon(ctx, want[0], acme.Problem{Type: acme.ProblemServerInternal, Detail: "signing could not run"}); err != nil || !moved {
		t.Fatalf("Abandon of a processing order = %v, %v; want true", moved, err)
	}
	got := order(t, s, o.ID)
	if got.Status != acme.StatusInvalid || got.Error == nil || got.Error.Type != acme.ProblemServerInternal {
		t.Fatalf("abandoned order = %s %+v", got.Status, got.Error)
	}
	if moved, err := s.Abandon(ctx, want[0], acme.Problem{Detail: "again"}); err != nil || moved {
		t.Fatalf("abandoning a failed order again = %v, %v; want false, nil", moved, err)
	}
}
