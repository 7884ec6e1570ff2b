package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// testPerspectives: the primary's answer asks each perspective once, a
// second ask (a retried job) neither asks again nor replaces the answer,
// each perspective's first answer stands, and the answers read back with
// the primary's first.
func testPerspectives(t *testing.T, s store.Store, x Extras) {
	ctx := t.Context()
	a := newAccount(t, s)
	o := newOrder(t, s, a, "persp.example.com")
	ch := authz(t, s, o.AuthzIDs[0]).Challenges[0]
	jobsOf := func() int64 {
		return x.Int(t, `SELECT count(*) FROM river_job WHERE kind = 'perspective_check'`)
	}
	before := jobsOf()
	primary := store.PerspectiveAnswer{ChallengeID: ch.ID, Perspective: store.PerspectivePrimary, Outcome: store.PerspectiveValid,
		Record: []byte(`[{"url":"http://persp.example.com/"}]`), Took: 12 * time.Millisecond}
	asked, err := s.PerspectivesAsk(ctx, primary, []string{"east", "west"})
	if err != nil || !asked {
		t.Fatalf("first ask: %v, %v", asked, err)
	}
	if n := jobsOf() - before; n != 2 {
		t.Fatalf("%d perspective_check jobs queued, want 2", n)
	}
	again := primary
	again.Took = time.Second
	if asked, err := s.PerspectivesAsk(ctx, again, []string{"east", "west"}); err != nil || asked {
		t.Fatalf("second ask: %v, %v; want nothing asked", asked, err)
	}
	if n := jobsOf() - before; n != 2 {
		t.Fatalf("%d perspective_check jobs after a second ask, want still 2", n)
	}
	east := store.PerspectiveAnswer{ChallengeID: ch.ID, Perspective: "east", Outcome: store.PerspectiveInvalid,
		Problem: &acme.Problem{Type: acme.ProblemUnauthorized, Detail: "wrong key authorization"}, Took: 30 * time.Millisecond}
	for _, a := range []store.PerspectiveAnswer{east, {ChallengeID: ch.ID, Perspective: "east", Outcome: store.PerspectiveValid}} {
		if err := s.PerspectiveAnswer(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	got, now, err := s.PerspectiveAnswers(ctx, ch.ID)
	if err != nil || len(got) != 2 {
		t.Fatalf("answers: %+v, %v; want the primary's and east's", got, err)
	}
	if p := got[0]; p.Perspective != store.PerspectivePrimary || p.Took != primary.Took || string(p.Record) != string(primary.Record) {
		t.Errorf("first answer %+v, want the primary's first answer", p)
	}
	if e := got[1]; e.Perspective != "east" || e.Outcome != store.PerspectiveInvalid || e.Problem == nil || e.Problem.Type != acme.ProblemUnauthorized {
		t.Errorf("east's answer %+v, want its first (invalid, unauthorized)", e)
	}
	if now.Before(got[0].At) || now.Sub(got[0].At) > time.Minute {
		t.Errorf("database clock %v against the answer's %v", now, got[0].At)
	}
}

// testCorroborated: a valid verdict marked Corroborated marks its
// authorization; a key or order asking for corroboration neither finds nor
// reuses one validated without it (OrderCreate refuses with
// ErrAuthzUnusable), and OrderToIssue names it; one that was corroborated
// serves both. AuthzProfiles names the profiles of an authorization's orders.
func testCorroborated(t *testing.T, s store.Store, _ Extras) {
	ctx := t.Context()
	a := newAccount(t, s)
	verdict := func(authzID string, corroborated bool) {
		t.Helper()
		c, claimed, err := s.ChallengeClaim(ctx, store.SignedUse{}, authz(t, s, authzID).Challenges[0].ID)
		if err != nil || !claimed {
			t.Fatalf("ChallengeClaim: %v, %v", claimed, err)
		}
		if err := s.ChallengeVerdict(ctx, store.Verdict{ChallengeID: c.ID, Status: acme.StatusValid, Corroborated: corroborated}); err != nil {
			t.Fatal(err)
		}
	}
	find := func(name string, strict bool) *store.Authorization {
		t.Helper()
		key := store.AuthzKey{Identifier: acme.Identifier{Type: acme.IdentifierDNS, Value: name}, Corroborated: strict}
		found, err := s.AuthzsReusable(ctx, a.ID, []store.AuthzKey{key}, []acme.ChallengeType{acme.ChallengeHTTP01}, time.Now())
		if err != nil || len(found) != 1 {
			t.Fatalf("AuthzsReusable(%s): %v, %v", name, found, err)
		}
		return found[0]
	}
	reuse := func(az *store.Authorization, name string) error {
		t.Helper()
		spec := orderSpec(t, s, a, name)
		spec.Profile, spec.Corroborated, spec.Authzs[0] = "strict", true, az
		_, err := s.OrderCreate(ctx, store.SignedUse{}, spec)
		return err
	}
	toIssue := func(o *store.Order) string {
		t.Helper()
		ti, err := s.OrderToIssue(ctx, o.ID, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return ti.Uncorroborated
	}

	plain := newOrder(t, s, a, "plain.example.com")
	if got, err := s.AuthzProfiles(ctx, plain.AuthzIDs[0]); err != nil || len(got) != 1 || got[0] != "default" {
		t.Fatalf("AuthzProfiles: %v, %v; want [default]", got, err)
	}
	verdict(plain.AuthzIDs[0], false)
	az := find("plain.example.com", false)
	if az == nil || az.ID != plain.AuthzIDs[0] {
		t.Fatalf("a profile not requiring corroboration does not reuse %s: found %+v", plain.AuthzIDs[0], az)
	}
	if got := find("plain.example.com", true); got != nil {
		t.Errorf("a profile requiring corroboration found uncorroborated %s to reuse", got.ID)
	}
	if err := reuse(az, "plain.example.com"); !errors.Is(err, store.ErrAuthzUnusable) {
		t.Errorf("OrderCreate of a strict order reusing uncorroborated %s: %v, want ErrAuthzUnusable", az.ID, err)
	}
	if got := toIssue(plain); got != plain.AuthzIDs[0] {
		t.Errorf("OrderToIssue's Uncorroborated = %q, want %s", got, plain.AuthzIDs[0])
	}

	strict := newOrder(t, s, a, "strict.example.com")
	verdict(strict.AuthzIDs[0], true)
	az = find("strict.example.com", true)
	if az == nil || az.ID != strict.AuthzIDs[0] {
		t.Fatalf("a profile requiring corroboration does not reuse corroborated %s: found %+v", strict.AuthzIDs[0], az)
	}
	if err := reuse(az, "strict.example.com"); err != nil {
		t.Errorf("OrderCreate of a strict order reusing corroborated %s: %v", az.ID, err)
	}
	if got := toIssue(strict); got != "" {
		t.Errorf("OrderToIssue's Uncorroborated = %q for a corroborated order", got)
	}
	if got, err := s.AuthzProfiles(ctx, strict.AuthzIDs[0]); err != nil || len(got) != 2 || got[0] != "default" || got[1] != "strict" {
		t.Errorf("AuthzProfiles after reuse: %v, %v; want [default strict]", got, err)
	}
}
