package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// testActivity: the overview's hourly counts show, in the current hour, the
// certificate issued, the challenges validated and failed, and the River
// jobs finalized; an hour outside the window counts nothing.
func testActivity(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	if _, err := s.Activity(ctx, 0); err == nil {
		t.Fatal("Activity(0 hours) succeeded, want an error")
	}
	a, err := s.Activity(ctx, 24)
	if err != nil || len(a.Issued) != 24 || sum(a.Issued)+sum(a.Valid)+sum(a.Invalid) != 0 {
		t.Fatalf("Activity of an empty store = %+v, %v", a, err)
	}
	acct := newAccount(t, s)
	o := readyOrder(t, s, acct, "a.activity.example", "b.activity.example") // two validated
	mustIssue(t, s, o, "ac71")
	failed := newOrder(t, s, acct, "c.activity.example")
	c, claimed, err := s.ChallengeClaim(ctx, store.SignedUse{}, authz(t, s, failed.AuthzIDs[0]).Challenges[0].ID)
	if err != nil || !claimed {
		t.Fatalf("ChallengeClaim: %v %v", claimed, err)
	}
	ev := store.AuditEvent{Actor: "worker", Action: store.ActionValidationFailed, Subject: c.ID, Trail: true}
	if err := s.ChallengeVerdict(ctx, store.Verdict{ChallengeID: c.ID, Status: acme.StatusInvalid,
		Error: &acme.Problem{Type: acme.ProblemIncorrectResponse, Detail: "no"}, Trail: &ev}); err != nil {
		t.Fatal(err)
	}
	// Two River jobs finalized now: one completed, one discarded (the
	// revocation's crl_generate and another).
	if _, err := s.Revoke(ctx, "ac71", 4, store.AuditEvent{Actor: "admin:test", Action: "revoke", Subject: "ac71"}); err != nil {
		t.Fatal(err)
	}
	if n := x.Int(t, "SELECT count(*) FROM river_job"); n < 2 {
		t.Fatalf("%d River jobs after issuing and revoking, want at least two", n)
	}
	x.Exec(t, "UPDATE river_job SET state = 'completed', finalized_at = created_at WHERE id = (SELECT MIN(id) FROM river_job)")
	x.Exec(t, "UPDATE river_job SET state = 'discarded', finalized_at = created_at WHERE id = (SELECT MAX(id) FROM river_job)")

	a, err = s.Activity(ctx, 24)
	if err != nil {
		t.Fatal(err)
	}
	last := func(v []int64) int64 { return v[len(v)-1] }
	if last(a.Issued) != 1 || last(a.Valid) != 2 || last(a.Invalid) != 1 || last(a.JobsCompleted) != 1 || last(a.JobsFailed) != 1 {
		t.Fatalf("Activity's current hour: issued %v valid %v invalid %v completed %v failed %v; want 1 2 1 1 1",
			a.Issued, a.Valid, a.Invalid, a.JobsCompleted, a.JobsFailed)
	}
	if sum(a.Issued) != 1 || sum(a.Valid) != 2 || sum(a.Invalid) != 1 || sum(a.JobsCompleted) != 1 || sum(a.JobsFailed) != 1 {
		t.Fatalf("Activity counted events in earlier hours: %+v", a)
	}
	now := dbNow(t, s)
	if want := now.UTC().Truncate(time.Hour).Add(-23 * time.Hour); !a.Start.Equal(want) {
		t.Fatalf("Activity.Start = %v, want %v", a.Start, want)
	}

	// The same events two hours ago fall out of a one-hour window.
	x.Exec(t, backdate(x, "certificates", "issued_at"))
	x.Exec(t, backdate(x, "challenges", "validated_at"))
	x.Exec(t, backdate(x, "audit_events", "at"))
	if a, err = s.Activity(ctx, 1); err != nil || sum(a.Issued)+sum(a.Valid)+sum(a.Invalid) != 0 || len(a.Issued) != 1 {
		t.Fatalf("Activity(1 hour) after backdating = %+v, %v; want nothing", a, err)
	}
	if a, err = s.Activity(ctx, 24); err != nil || !slices.Contains(a.Issued, 1) || last(a.Issued) != 0 {
		t.Fatalf("Activity(24 hours) after backdating issued %v, %v; want 1 two hours ago", a.Issued, err)
	}
}

func sum(v []int64) (n int64) {
	for _, x := range v {
		n += x
	}
	return n
}

// backdate is a statement moving column col of table's rows two hours back.
func backdate(x Extras, table, col string) string {
	if x.Dialect == "sqlite" {
		return "UPDATE " + table + " SET " + col + " = " + col + " - 7200000000 WHERE " + col + " IS NOT NULL"
	}
	return "UPDATE " + table + " SET " + col + " = " + col + " - interval '2 hours' WHERE " + col + " IS NOT NULL"
}
