package storetest

import (
	"strconv"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// agePauses moves every run of failures back by d, as the database clock
// moving forward by d would age them.
func agePauses(t *testing.T, x Extras, d time.Duration) {
	t.Helper()
	if x.Dialect == "postgres" {
		x.Exec(t, "UPDATE validation_streaks SET first_failed_at = first_failed_at - "+
			"interval '1 microsecond' * "+strconv.FormatInt(d.Microseconds(), 10))
		return
	}
	x.Exec(t, "UPDATE validation_streaks SET first_failed_at = first_failed_at - "+strconv.FormatInt(d.Microseconds(), 10))
}

// failOnce orders name for acct and fails its validation.
func failOnce(t *testing.T, s store.Store, acct *store.Account, name string) {
	t.Helper()
	o := newOrder(t, s, acct, name)
	validate(t, s, o.AuthzIDs[0], acme.StatusInvalid)
}

// testPauses: a failed verdict lengthens the account's run for the
// identifier in its own transaction and a valid one ends it; an order
// naming an identifier whose run the rule pauses is refused with nothing
// written, by OrderCreate (ErrPaused) and by a claim (ErrNotClaimed); lifting
// deletes runs and is audited.
func testPauses(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a, b := newAccount(t, s), newAccount(t, s)
	for range 3 {
		failOnce(t, s, a, "zombie.example.com")
	}
	failOnce(t, s, a, "*.wild.example.com")
	failOnce(t, s, b, "zombie.example.com")
	rule := store.PauseRule{After: time.Hour, MinFailures: 3}

	list := func(f store.PauseFilter) []store.Pause {
		t.Helper()
		ps, _, err := s.PausesList(ctx, rule, f, store.Page{})
		if err != nil {
			t.Fatalf("PausesList: %v", err)
		}
		return ps
	}
	runs := list(store.PauseFilter{AccountID: a.ID, All: true})
	if len(runs) != 2 {
		t.Fatalf("account a has %d runs, want 2 (zombie, wild): %+v", len(runs), runs)
	}
	for _, r := range runs {
		if r.Paused {
			t.Errorf("run %+v is paused an instant after its first failure, want not before an hour", r)
		}
		if r.Identifier.Value == "zombie.example.com" && r.Failures != 3 {
			t.Errorf("zombie.example.com: %d failures, want 3", r.Failures)
		}
		if r.Identifier.Value == "wild.example.com" && r.Failures != 1 {
			t.Errorf("the wildcard's run is %+v, want its base name with 1 failure", r)
		}
	}
	if ps := list(store.PauseFilter{}); len(ps) != 0 {
		t.Fatalf("paused before the rule's time: %+v", ps)
	}

	agePauses(t, x, 2*time.Hour)
	ps := list(store.PauseFilter{})
	if len(ps) != 1 || ps[0].AccountID != a.ID || ps[0].Identifier.Value != "zombie.example.com" || !ps[0].Paused {
		t.Fatalf("paused after two hours = %+v, want only account a for zombie.example.com (b and wild failed once)", ps)
	}
	if ps, _, _ := s.PausesList(ctx, store.PauseRule{}, store.PauseFilter{}, store.Page{}); len(ps) != 0 {
		t.Errorf("the zero rule pauses %+v", ps)
	}
	if ps, _, _ := s.PausesList(ctx, store.PauseRule{After: time.Hour, MinFailures: 4}, store.PauseFilter{}, store.Page{}); len(ps) != 0 {
		t.Errorf("a rule of 4 failures pauses %+v after 3", ps)
	}

	orders := func(acct *store.Account) int {
		ids, _, err := s.OrdersByAccount(ctx, acct.ID, store.Page{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return len(ids)
	}
	paused := func(acct *store.Account, names ...string) store.NewOrder {
		o := orderSpec(t, s, acct, names...)
		o.Pause = rule
		return o
	}
	for _, names := range [][]string{{"zombie.example.com"}, {"ok.example.com", "*.zombie.example.com"}} {
		before := orders(a)
		_, err := s.OrderCreate(ctx, store.SignedUse{}, paused(a, names...))
		wantErr(t, "an order of a paused identifier", err, store.ErrPaused)
		if n := orders(a) - before; n != 0 {
			t.Errorf("%v: %d orders written though paused", names, n)
		}
		claimed := paused(a, names...)
		claimed.Clock = dbNow(t, s)
		_, err = s.OrderCreate(ctx, signedAs(t, s, a), claimed)
		wantErr(t, "a claimed order of a paused identifier", err, store.ErrNotClaimed)
		if n := orders(a) - before; n != 0 {
			t.Errorf("%v: %d orders written by a claim though paused", names, n)
		}
	}
	for _, tc := range []struct {
		what string
		o    store.NewOrder
	}{
		{"another identifier", paused(a, "ok.example.com")},
		{"another account", paused(b, "zombie.example.com")},
		{"pausing off", orderSpec(t, s, a, "zombie.example.com")},
	} {
		if _, err := s.OrderCreate(ctx, store.SignedUse{}, tc.o); err != nil {
			t.Errorf("%s: OrderCreate: %v", tc.what, err)
		}
	}

	// A valid verdict ends the run.
	validate(t, s, newOrder(t, s, a, "wild.example.com").AuthzIDs[0], acme.StatusValid)
	if runs := list(store.PauseFilter{AccountID: a.ID, All: true}); len(runs) != 1 || runs[0].Identifier.Value != "zombie.example.com" {
		t.Errorf("after wild.example.com validated, the runs are %+v, want zombie.example.com's alone", runs)
	}

	// Lifting: only the identifier named, audited; nothing to lift records nothing.
	ev := store.AuditEvent{Actor: "cli:test", Detail: "lifted in a test"}
	other := acme.Identifier{Type: acme.IdentifierDNS, Value: "nothing.example.com"}
	if n, err := s.PauseLift(ctx, a.ID, &other, ev); err != nil || n != 0 {
		t.Fatalf("lifting a run that does not exist: %d, %v", n, err)
	}
	zombie := acme.Identifier{Type: acme.IdentifierDNS, Value: "*.zombie.example.com"}
	if n, err := s.PauseLift(ctx, a.ID, &zombie, ev); err != nil || n != 1 {
		t.Fatalf("lifting zombie.example.com (named by its wildcard): %d, %v", n, err)
	}
	if _, err := s.OrderCreate(ctx, store.SignedUse{}, paused(a, "zombie.example.com")); err != nil {
		t.Errorf("an order after the pause was lifted: %v", err)
	}
	evs, _, err := s.AuditFind(ctx, store.AuditFilter{Action: store.ActionPauseLifted}, store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Subject != a.ID || evs[0].Actor != "cli:test" {
		t.Errorf("audit of the lifts = %+v, want one event for account a", evs)
	}
	if n, err := s.PauseLift(ctx, b.ID, nil, store.AuditEvent{Actor: "acme:" + b.ID}); err != nil || n != 1 {
		t.Errorf("lifting every run of account b: %d, %v", n, err)
	}

	// A failure after over a week of silence starts a new run: an account
	// idle for months that fails once is not paused at once.
	c := newAccount(t, s)
	for range 3 {
		failOnce(t, s, c, "idle.example.com")
	}
	agePauses(t, x, 30*24*time.Hour)
	ageLastFailure(t, x, 9*24*time.Hour)
	failOnce(t, s, c, "idle.example.com")
	runs = list(store.PauseFilter{AccountID: c.ID, All: true})
	if len(runs) != 1 || runs[0].Failures != 1 || runs[0].Paused {
		t.Errorf("a failure nine days after the last = %+v, want a new run of 1 failure, not paused", runs)
	}
}

// ageLastFailure moves every run's last failure back by d.
func ageLastFailure(t *testing.T, x Extras, d time.Duration) {
	t.Helper()
	if x.Dialect == "postgres" {
		x.Exec(t, "UPDATE validation_streaks SET last_failed_at = last_failed_at - "+
			"interval '1 microsecond' * "+strconv.FormatInt(d.Microseconds(), 10))
		return
	}
	x.Exec(t, "UPDATE validation_streaks SET last_failed_at = last_failed_at - "+strconv.FormatInt(d.Microseconds(), 10))
}

// signedAs is a fresh signed use of acct's, with a nonce no one consumed.
func signedAs(t *testing.T, s store.Store, acct *store.Account) store.SignedUse {
	t.Helper()
	epoch, err := s.NonceEpoch(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return store.SignedUse{Nonce: store.NonceUse{Nonce: rnd(16), Expires: dbNow(t, s).Add(time.Hour), Epoch: epoch}, AccountID: acct.ID, KeyJWK: acct.KeyJWK}
}
