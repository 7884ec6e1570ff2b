package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/migrations"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

func testNow(t *testing.T, s store.Store, _ Extras) {
	now := dbNow(t, s)
	if d := time.Since(now); d > time.Minute || d < -time.Minute {
		t.Fatalf("database clock %v is %v away from this host's", now, d)
	}
	if err := s.Ping(ctxT(t)); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

// testNotFound: every lookup and every move of a missing record is
// store.ErrNotFound, in both dialects.
func testNotFound(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	_, err := s.AccountByID(ctx, "nope")
	wantErr(t, "AccountByID", err, store.ErrNotFound)
	_, err = s.AccountByThumbprint(ctx, "nope")
	wantErr(t, "AccountByThumbprint", err, store.ErrNotFound)
	_, err = s.AccountUpdate(ctx, "nope", nil)
	wantErr(t, "AccountUpdate", err, store.ErrNotFound)
	_, err = s.AccountDeactivate(ctx, "nope")
	wantErr(t, "AccountDeactivate", err, store.ErrNotFound)
	_, err = s.AccountKeyChange(ctx, "nope", "a", []byte(`{}`), "b")
	wantErr(t, "AccountKeyChange", err, store.ErrNotFound)
	_, err = s.OrderByID(ctx, "nope")
	wantErr(t, "OrderByID", err, store.ErrNotFound)
	_, err = s.AuthzByID(ctx, "nope")
	wantErr(t, "AuthzByID", err, store.ErrNotFound)
	_, err = s.AuthzDeactivate(ctx, "nope")
	wantErr(t, "AuthzDeactivate", err, store.ErrNotFound)
	_, err = s.ChallengeWithAuthz(ctx, "nope")
	wantErr(t, "ChallengeWithAuthz", err, store.ErrNotFound)
	_, _, err = s.ChallengeClaim(ctx, store.SignedUse{}, "nope")
	wantErr(t, "ChallengeClaim", err, store.ErrNotFound)
	err = s.ChallengeVerdict(ctx, store.Verdict{ChallengeID: "nope", Status: acme.StatusValid})
	wantErr(t, "ChallengeVerdict", err, store.ErrNotFound)
	_, _, err = s.OrderFinalizeBegin(ctx, store.SignedUse{}, "nope", "default", []byte("csr"), nil)
	wantErr(t, "OrderFinalizeBegin", err, store.ErrNotFound)
	err = s.OrderIssued(ctx, store.Issued{OrderID: "nope", Certificate: store.Certificate{Serial: "01"}})
	wantErr(t, "OrderIssued", err, store.ErrNotFound)
	err = s.OrderFail(ctx, "nope", acme.Problem{Type: acme.ProblemBadCSR})
	wantErr(t, "OrderFail", err, store.ErrNotFound)
	_, err = s.CertificateBySerial(ctx, "nope")
	wantErr(t, "CertificateBySerial", err, store.ErrNotFound)
	_, err = s.Revoke(ctx, "nope", 1, store.AuditEvent{Actor: "cli:test", Action: "revoke"})
	wantErr(t, "Revoke", err, store.ErrNotFound)
	_, err = s.RevokeQueue(ctx, "nope", "up", 1, store.AuditEvent{Actor: "cli:test", Action: "revoke"})
	wantErr(t, "RevokeQueue", err, store.ErrNotFound)
	_, err = s.RevokeProgress(ctx, "nope", 1)
	wantErr(t, "RevokeProgress", err, store.ErrNotFound)
	_, err = s.CRLLatest(ctx, "nope")
	wantErr(t, "CRLLatest", err, store.ErrNotFound)
	err = s.Requeue(ctx, jobs.Subject{Kind: jobs.KindChallengeValidate, ID: "nope"})
	wantErr(t, "Requeue challenge", err, store.ErrNotFound)
	err = s.Requeue(ctx, jobs.Subject{Kind: jobs.KindSignerIssue, ID: "nope"})
	wantErr(t, "Requeue order", err, store.ErrNotFound)
	_, err = s.Abandon(ctx, jobs.Subject{Kind: jobs.KindChallengeValidate, ID: "nope"}, acme.Problem{})
	wantErr(t, "Abandon challenge", err, store.ErrNotFound)
	_, err = s.Abandon(ctx, jobs.Subject{Kind: jobs.KindSignerIssue, ID: "nope"}, acme.Problem{})
	wantErr(t, "Abandon order", err, store.ErrNotFound)
	_, err = reusable(ctx, s, "nope", acme.Identifier{Type: acme.IdentifierDNS, Value: "example.com"}, false, time.Now())
	wantErr(t, "AuthzReusable", err, store.ErrNotFound)
	// An order for a missing account names what is missing rather than
	// failing with a driver error.
	_, err = s.OrderCreate(ctx, store.SignedUse{}, store.NewOrder{AccountID: "nope", Profile: "default", Expires: time.Now().Add(time.Hour),
		Identifiers: []acme.Identifier{{Type: acme.IdentifierDNS, Value: "example.com"}}})

	wantErr(t, "OrderCreate for a missing account", err, store.ErrNotFound)
}

// handles returns s and n-1 more stores on the same database, each with its
// own handle: separate processes, as far as SQLite's locking is concerned.
func handles(t *testing.T, s store.Store, x Extras, n int) []store.Store {
	out := []store.Store{s}
	for len(out) < n {
		out = append(out, x.Open(t, nil))
	}
	return out
}

// race runs fn from 16 goroutines spread over the handles and counts wins.
func race(t *testing.T, stores []store.Store, fn func(s store.Store) (bool, error)) int {
	var wins atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			won, err := fn(stores[i%len(stores)])
			if err != nil {
				t.Errorf("racer %d: %v", i, err)
			}
			if won {
				wins.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	return int(wins.Load())
}

// testLeases: the lease's expiry is on the database clock; a short ttl
// expires after a short wait measured on that clock, not on this host's.
func testLeases(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	other := x.Open(t, nil)
	lock := func(s store.Store, holder string, ttl time.Duration) bool {
		t.Helper()
		ok, err := s.TryLock(ctx, "crl:issuer-1", holder, ttl)
		if err != nil {
			t.Fatalf("TryLock(%s): %v", holder, err)
		}
		return ok
	}
	if !lock(s, "a", time.Hour) {
		t.Fatal("a could not take a free lease")
	}
	if lock(other, "b", time.Hour) {
		t.Fatal("b took a live lease held by a")
	}
	if !lock(s, "a", time.Hour) {
		t.Fatal("a could not renew its own lease")
	}
	wantErr(t, "b releasing a's lease", other.Unlock(ctx, "crl:issuer-1", "b"), store.ErrLeaseLost)
	if err := s.Unlock(ctx, "crl:issuer-1", "a"); err != nil {
		t.Fatal(err)
	}
	if !lock(other, "b", 50*time.Millisecond) {
		t.Fatal("b could not take a released lease")
	}
	start := dbNow(t, s)
	for dbNow(t, s).Sub(start) < 60*time.Millisecond {
		time.Sleep(10 * time.Millisecond)
	}
	if !lock(s, "a", time.Hour) {
		t.Fatal("a could not take b's expired lease")
	}
	wantErr(t, "b releasing a lease it lost", other.Unlock(ctx, "crl:issuer-1", "b"), store.ErrLeaseLost)
	if lock(other, "b", time.Hour) {
		t.Fatal("b renewed a lease it lost")
	}
}

func testAudit(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	for i := range 3 {
		ev := store.AuditEvent{Actor: "admin:bob", Action: "account.deactivate", Subject: fmt.Sprint(i), Detail: "d"}
		if i == 0 {
			ev.At = at
		}
		if err := s.AuditRecord(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	first, next, err := s.AuditList(ctx, store.Page{Limit: 2})
	if err != nil || len(first) != 2 || next == "" || first[0].Subject != "2" || first[1].Subject != "1" {
		t.Fatalf("first audit page = %+v next %q %v", first, next, err)
	}
	rest, next, err := s.AuditList(ctx, store.Page{After: next, Limit: 2})
	if err != nil || len(rest) != 1 || next != "" || rest[0].Subject != "0" || !rest[0].At.Equal(at) || rest[0].ID == 0 {
		t.Fatalf("second audit page = %+v next %q %v", rest, next, err)
	}
}

func testMigrationsIdempotent(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	applied, err := x.Migrate(ctx)
	if err != nil || len(applied) != 0 {
		t.Fatalf("migrating a migrated database applied %v, %v; want nothing", applied, err)
	}
	st, err := x.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	files, err := migrations.Files(st.Dialect)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Pending) != 0 || len(st.Applied) != len(files) || st.Current() != st.Latest || st.Latest != files[len(files)-1].Version {
		t.Fatalf("status = %+v, want every one of %d migrations applied", st, len(files))
	}
}

func testMigrationsRefuseNewer(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	x.Exec(t, "INSERT INTO schema_migrations (version, name) VALUES (9999, '9999_from_the_future.up.sql')")
	_, err := x.Migrate(ctx)
	if !errors.Is(err, store.ErrTooNew) {
		t.Fatalf("migrating a newer database: %v, want store.ErrTooNew", err)
	}
	if !strings.Contains(err.Error(), "upgrade") || !strings.Contains(err.Error(), "9999") {
		t.Fatalf("the refusal %q does not tell the operator to upgrade to version 9999", err)
	}
	st, err := x.Status(ctx)
	if !errors.Is(err, store.ErrTooNew) || st.Current() != 9999 {
		t.Fatalf("status of a newer database = %+v, %v; want version 9999 and store.ErrTooNew", st, err)
	}
}
