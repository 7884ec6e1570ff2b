package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

func testInvalidVerdict(t *testing.T, s store.Store, _ Extras) {
	a := newAccount(t, s)
	o := newOrder(t, s, a, "bad.example.com", "good.example.com")
	c := validate(t, s, o.AuthzIDs[0], acme.StatusInvalid)
	got := challenge(t, s, c.ID)
	if got.Status != acme.StatusInvalid || got.Error == nil || got.Error.Type != acme.ProblemIncorrectResponse || got.Validated != nil {
		t.Fatalf("failed challenge = %+v", got)
	}
	az := authz(t, s, o.AuthzIDs[0])
	if az.Status != acme.StatusInvalid {
		t.Fatalf("authorization is %s after its challenge failed, want invalid", az.Status)
	}
	for _, ch := range az.Challenges {
		if ch.Status != acme.StatusInvalid {
			t.Errorf("sibling challenge %s is %s, want invalid with its authorization", ch.Type, ch.Status)
		}
	}
	ord := order(t, s, o.ID)
	if ord.Status != acme.StatusInvalid || ord.Error == nil || ord.Error.Type != acme.ProblemIncorrectResponse {
		t.Fatalf("order = %s %+v after an authorization failed, want invalid with the challenge's problem", ord.Status, ord.Error)
	}
	// The other authorization is untouched.
	if st := authz(t, s, o.AuthzIDs[1]).Status; st != acme.StatusPending {
		t.Fatalf("unrelated authorization is %s, want pending", st)
	}
}

// testConcurrentVerdicts: every authorization of an order succeeds at once,
// each verdict on its own handle (as workers do). Each verdict decides
// readiness after the others' authorizations are visible to it, so the
// last one always moves the order to ready; none may leave it pending.
func testConcurrentVerdicts(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	stores := handles(t, s, x, 4)
	a := newAccount(t, s)
	for round := range 5 {
		names := make([]string, 4)
		for i := range names {
			names[i] = fmt.Sprintf("n%d.r%d.verdicts.example.com", i, round)
		}
		o := newOrder(t, s, a, names...)
		var claimed []string
		for _, id := range o.AuthzIDs {
			c, ok, err := s.ChallengeClaim(ctx, store.SignedUse{}, authz(t, s, id).Challenges[0].ID)
			if err != nil || !ok {
				t.Fatalf("ChallengeClaim: %v %v", ok, err)
			}
			claimed = append(claimed, c.ID)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, id := range claimed {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if err := stores[i%len(stores)].ChallengeVerdict(ctx, store.Verdict{ChallengeID: id, Status: acme.StatusValid}); err != nil {
					t.Errorf("ChallengeVerdict: %v", err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if got := order(t, s, o.ID).Status; got != acme.StatusReady {
			t.Fatalf("round %d: order is %s after all %d authorizations were validated at once, want ready", round, got, len(names))
		}
	}
}

// testLateVerdict: two challenges of one authorization answered at once.
// A late failure after a success does not undo it (the authorization, the
// order and the valid challenge stay); a failure first takes the other
// processing challenge with it, so the late success finds it decided.
func testLateVerdict(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	for _, firstValid := range []bool{true, false} {
		o := newOrder(t, s, a, fmt.Sprintf("late-%v.example.com", firstValid))
		az := authz(t, s, o.AuthzIDs[0])
		if len(az.Challenges) < 2 {
			t.Fatalf("authorization has %d challenges, want at least 2", len(az.Challenges))
		}
		c1, c2 := az.Challenges[0].ID, az.Challenges[1].ID
		for _, id := range []string{c1, c2} {
			if _, claimed, err := s.ChallengeClaim(ctx, store.SignedUse{}, id); err != nil || !claimed {
				t.Fatalf("ChallengeClaim(%s): claimed=%v err=%v", id, claimed, err)
			}
		}
		first, second := acme.StatusValid, acme.StatusInvalid
		if !firstValid {
			first, second = acme.StatusInvalid, acme.StatusValid
		}
		verdict := func(id string, st acme.Status) error {
			v := store.Verdict{ChallengeID: id, Status: st}
			if st == acme.StatusInvalid {
				v.Error = &acme.Problem{Type: acme.ProblemIncorrectResponse}
			}
			return s.ChallengeVerdict(ctx, v)
		}
		if err := verdict(c1, first); err != nil {
			t.Fatalf("first verdict: %v", err)
		}
		err := verdict(c2, second)
		if firstValid {
			if err != nil {
				t.Fatalf("a late failure on a still processing challenge: %v", err)
			}
			if st := challenge(t, s, c1).Status; st != acme.StatusValid {
				t.Errorf("the valid challenge became %s after a late failure", st)
			}
			if st := challenge(t, s, c2).Status; st != acme.StatusInvalid {
				t.Errorf("the late failure left its challenge %s", st)
			}
			if st := authz(t, s, az.ID).Status; st != acme.StatusValid {
				t.Errorf("authorization is %s after a late failure, want valid", st)
			}
			if st := order(t, s, o.ID).Status; st != acme.StatusReady {
				t.Errorf("order is %s after a late failure, want ready", st)
			}
			continue
		}
		wantErr(t, "a late success after the authorization failed", err, store.ErrConflict)
		if st := challenge(t, s, c2).Status; st != acme.StatusInvalid {
			t.Errorf("the sibling of a failed challenge is %s, want invalid", st)
		}
		if st := authz(t, s, az.ID).Status; st != acme.StatusInvalid {
			t.Errorf("authorization is %s, want invalid", st)
		}
		if st := order(t, s, o.ID).Status; st != acme.StatusInvalid {
			t.Errorf("order is %s, want invalid", st)
		}
	}
}

func testVerdictIsTerminal(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	o := newOrder(t, s, a, "terminal.example.com")
	az := authz(t, s, o.AuthzIDs[0])
	err := s.ChallengeVerdict(ctx, store.Verdict{ChallengeID: az.Challenges[0].ID, Status: acme.StatusValid})
	wantErr(t, "verdict on a pending challenge", err, store.ErrConflict)
	if st := challenge(t, s, az.Challenges[0].ID).Status; st != acme.StatusPending {
		t.Fatalf("a refused verdict moved the challenge to %s", st)
	}
	c := validate(t, s, az.ID, acme.StatusValid)
	err = s.ChallengeVerdict(ctx, store.Verdict{ChallengeID: c.ID, Status: acme.StatusInvalid,
		Error: &acme.Problem{Type: acme.ProblemConnection}})
	wantErr(t, "second verdict", err, store.ErrConflict)
	if st := challenge(t, s, c.ID).Status; st != acme.StatusValid {
		t.Fatalf("second verdict moved the challenge to %s", st)
	}
	if st := order(t, s, o.ID).Status; st != acme.StatusReady {
		t.Fatalf("second verdict moved the order to %s", st)
	}
	// A repeated POST of the valid challenge claims nothing.
	if got, claimed, err := s.ChallengeClaim(ctx, store.SignedUse{}, c.ID); err != nil || claimed || got.Status != acme.StatusValid {
		t.Fatalf("claiming a valid challenge: %+v claimed=%v err=%v", got, claimed, err)
	}
}

// testVerdictLeavesItsJob: a verdict commits the challenge, its
// authorization and its order together and writes nothing to the
// challenge_validate job: River completes it after the handler returns. A
// job run again after that (its worker died before River marked it) sees
// the challenge no longer processing, and a second verdict is refused.
func testVerdictLeavesItsJob(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	o := newOrder(t, s, a, "verdict-job.example.com")
	cid := authz(t, s, o.AuthzIDs[0]).Challenges[0].ID
	if _, claimed, err := s.ChallengeClaim(ctx, store.SignedUse{}, cid); err != nil || !claimed {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	if err := s.ChallengeVerdict(ctx, store.Verdict{ChallengeID: cid, Status: acme.StatusValid}); err != nil {
		t.Fatalf("ChallengeVerdict: %v", err)
	}
	if st := challenge(t, s, cid).Status; st != acme.StatusValid {
		t.Fatalf("challenge is %s after its verdict, want valid", st)
	}
	if st := authz(t, s, o.AuthzIDs[0]).Status; st != acme.StatusValid {
		t.Fatalf("authorization is %s after its challenge's verdict, want valid", st)
	}
	if st := order(t, s, o.ID).Status; st != acme.StatusReady {
		t.Fatalf("order is %s after its only authorization's verdict, want ready", st)
	}
	if n := jobsIn(t, x, jobs.KindChallengeValidate, "available"); n != 1 {
		t.Fatalf("%d available challenge_validate jobs after the verdict, want 1: the store must not touch the job", n)
	}
	// What a rescued job's handler reads first.
	tgt, err := s.ChallengeWithAuthz(ctx, cid)
	if err != nil || tgt.Challenge.Status != acme.StatusValid {
		t.Fatalf("ChallengeWithAuthz after the verdict: %+v, %v; want the challenge valid", tgt, err)
	}
	err = s.ChallengeVerdict(ctx, store.Verdict{ChallengeID: cid, Status: acme.StatusInvalid})
	wantErr(t, "a rescued job's second verdict", err, store.ErrConflict)
}

func testAuthzDeactivate(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	o := readyOrder(t, s, a, "deact.example.com")
	// A second order on the same authorization, being signed.
	spec := orderSpec(t, s, a, "deact.example.com")
	spec.Authzs = []*store.Authorization{{ID: o.AuthzIDs[0]}}
	signing, err := s.OrderCreate(ctx, store.SignedUse{}, spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, claimed, err := s.OrderFinalizeBegin(ctx, store.SignedUse{}, signing.ID, signing.Profile, []byte("csr-der"), nil); err != nil || !claimed {
		t.Fatalf("OrderFinalizeBegin = %v, %v", claimed, err)
	}
	az, err := s.AuthzDeactivate(ctx, o.AuthzIDs[0])
	if err != nil || az.Status != acme.StatusDeactivated {
		t.Fatalf("AuthzDeactivate = %+v, %v", az, err)
	}
	for _, id := range []string{o.ID, signing.ID} {
		if got := order(t, s, id); got.Status != acme.StatusInvalid || got.Error == nil {
			t.Fatalf("order %s using a deactivated authorization is %s (%v), want invalid with a problem", id, got.Status, got.Error)
		}
	}
	_, err = s.AuthzDeactivate(ctx, o.AuthzIDs[0])
	wantErr(t, "deactivating twice", err, store.ErrConflict)
}

// testVerdictExpiresBy: a valid verdict with ExpiresBy (dns-persist-01's
// persistUntil) brings the authorization's expiry forward to it, never
// back, so it is not reused past the record's end.
func testVerdictExpiresBy(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	o := newOrder(t, s, a, "sooner.example.com", "later.example.com")
	for i, id := range o.AuthzIDs {
		before := authz(t, s, id)
		by := before.Expires.Add(-time.Hour)
		if i == 1 {
			by = before.Expires.Add(time.Hour)
		}
		c, claimed, err := s.ChallengeClaim(ctx, store.SignedUse{}, before.Challenges[0].ID)
		if err != nil || !claimed {
			t.Fatalf("ChallengeClaim: claimed=%v err=%v", claimed, err)
		}
		if err := s.ChallengeVerdict(ctx, store.Verdict{ChallengeID: c.ID, Status: acme.StatusValid, ExpiresBy: by}); err != nil {
			t.Fatal(err)
		}
		after := authz(t, s, id)
		want := by
		if i == 1 {
			want = before.Expires
		}
		if after.Status != acme.StatusValid || !after.Expires.Equal(want.Truncate(time.Microsecond)) {
			t.Errorf("%s: status %s, expires %s; want valid, expiring at %s (ExpiresBy %s, was %s)",
				after.Identifier.Value, after.Status, after.Expires, want, by, before.Expires)
		}
	}
	if st := order(t, s, o.ID).Status; st != acme.StatusReady {
		t.Fatalf("order is %s, want ready", st)
	}
}
