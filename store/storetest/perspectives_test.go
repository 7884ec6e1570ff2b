package storetest

import (
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
