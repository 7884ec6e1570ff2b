package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/postgres"
)

// TestCommitWithInsert: a claim armed with commitWithInsert sends its
// statements ahead, River's insert, the insert's notification and COMMIT
// in one round trip; a statement ahead that fails, or a COMMIT that fails,
// commits nothing and notifies no one, and the failed COMMIT is the
// insert's error before its rows are closed (River checks Err first).
// River's own notification after the COMMIT costs nothing when it says
// the same, and is sent when it does not.
func TestCommitWithInsert(t *testing.T) {
	t.Parallel()
	ctx, conn, rt := tracedConn(t)
	for _, q := range []string{
		`CREATE TABLE parent (k int PRIMARY KEY)`,
		`CREATE TABLE child (k int REFERENCES parent DEFERRABLE INITIALLY DEFERRED)`,
		`INSERT INTO parent VALUES (1)`,
		`LISTEN "public.river_insert"`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	// River learns the server's capabilities once per driver, with a
	// query of its own; let it, outside the transactions measured.
	driver := riverpgxv5.New(nil)
	warm := postgres.NewLazyTx(conn)
	if err := driver.UnwrapExecutor(warm).NotifyMany(ctx, &riverdriver.NotifyManyParams{Topic: "river_insert", Payload: []string{}}); err != nil {
		t.Fatal(err)
	}
	if err := warm.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	const insert = postgres.RiverInsertSQL + "\nSELECT 7" // a statement River's insert would be
	committed := func() (n int) {
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM child`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	tests := []struct {
		name      string
		ahead     string // the claim's statement
		wantErr   string // SQLSTATE of the insert's error; "" for none
		riverSays string // River's own notification after the COMMIT; "" for none
		wantTrips int64
	}{
		{"commits with the insert", `INSERT INTO child VALUES (1)`, "", "", 1},
		{"River's own notification, the same", `INSERT INTO child VALUES (1)`, "", `{"queue": "q1"}`, 1},
		{"River's own notification, another", `INSERT INTO child VALUES (1)`, "", `{"queue": "other"}`, 2},
		{"a failed statement ahead", `SELECT 1 / 0`, "22012", "", 1},
		{"a failed COMMIT", `INSERT INTO child VALUES (42)`, "23503", "", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := conn.Exec(ctx, `DELETE FROM child`); err != nil {
				t.Fatal(err)
			}
			before := rt.n.Load()
			tx := postgres.NewLazyTx(conn)
			defer tx.Rollback(ctx) //nolint:errcheck // a no-op once committed
			defer postgres.CommitWithInsert(tx, "q1")()
			b := &pgx.Batch{}
			b.Queue(tc.ahead)
			postgres.SendAhead(tx, b, func(br pgx.BatchResults) error { _, err := br.Exec(); return err })
			r, err := tx.Query(ctx, insert)
			if err == nil {
				for r.Next() {
				}
				err = r.Err() // before Close, as River's generated code does
				r.Close()
			}
			var pe *pgconn.PgError
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("the insert: %v", err)
			case tc.wantErr != "" && (!errors.As(err, &pe) || pe.Code != tc.wantErr):
				t.Fatalf("the insert's error = %v, want SQLSTATE %s", err, tc.wantErr)
			}
			if tc.riverSays != "" {
				if err := driver.UnwrapExecutor(tx).NotifyMany(ctx, &riverdriver.NotifyManyParams{Topic: "river_insert", Payload: []string{tc.riverSays}}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.wantErr == "" {
				if err := tx.Commit(ctx); err != nil {
					t.Fatalf("Commit after the COMMIT went out: %v", err)
				}
			}
			if got := rt.n.Load() - before; got != tc.wantTrips {
				t.Errorf("%d round trips, want %d", got, tc.wantTrips)
			}
			if tc.wantErr != "" {
				_ = tx.Rollback(ctx) // as the store's InTx does after an error
			}
			if got, want := committed(), b2i(tc.wantErr == ""); got != want {
				t.Errorf("%d rows committed, want %d", got, want)
			}
			// The claim's notification, River's own if it said something
			// else, and nothing more.
			var want []string
			if tc.wantErr == "" {
				want = append(want, `{"queue": "q1"}`)
			}
			if tc.riverSays != "" && tc.riverSays != `{"queue": "q1"}` {
				want = append(want, tc.riverSays)
			}
			for _, p := range append(want, "") {
				if err := wantNotification(ctx, conn, p); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestClaimRetried: a claim, and then a verdict, that fails with a
// serialization failure is run again (sqlstore's retrying) and the second
// attempt moves the challenge. A trigger raises 40001 on the first UPDATE
// of a challenge after the sequence is reset (it counts attempts, since a
// failed transaction rolls back any table it wrote). The claim's batch is
// built once, outside the retried transaction, so its second attempt must
// send the swap's statement as built, not the first attempt's rewriting
// of it (mustMove) rewritten again; the verdict builds its batch on each
// attempt, so for it this shows only that the retry lands.
func TestClaimRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, x := newStore(t)
	for _, q := range []string{
		`CREATE SEQUENCE claim_attempts`,
		`CREATE FUNCTION fail_first_claim() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF nextval('claim_attempts') = 1 THEN
    RAISE EXCEPTION 'the first claim fails' USING ERRCODE = '40001';
  END IF;
  RETURN NEW;
END $$`,
		`CREATE TRIGGER fail_first_claim BEFORE UPDATE ON challenges FOR EACH ROW EXECUTE FUNCTION fail_first_claim()`,
	} {
		x.Exec(t, q)
	}
	acct, err := s.AccountCreate(ctx, &store.Account{KeyJWK: []byte(`{"kty":"OKP","crv":"Ed25519","x":"retried"}`), Thumbprint: "retried", TermsAgreed: true})
	if err != nil {
		t.Fatal(err)
	}
	now, err := s.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	o, err := s.OrderCreate(ctx, store.SignedUse{}, store.NewOrder{AccountID: acct.ID, Profile: "default", Expires: now.Add(time.Hour),
		Identifiers: []acme.Identifier{{Type: acme.IdentifierDNS, Value: "retried.example"}},
		Authzs: []*store.Authorization{{AccountID: acct.ID, Identifier: acme.Identifier{Type: acme.IdentifierDNS, Value: "retried.example"},
			Status: acme.StatusPending, Expires: now.Add(time.Hour),
			Challenges: []store.Challenge{{Type: acme.ChallengeHTTP01, Token: "tok-retried", Status: acme.StatusPending}}}}})

	if err != nil {
		t.Fatal(err)
	}
	a, err := s.AuthzByID(ctx, o.AuthzIDs[0])
	if err != nil {
		t.Fatal(err)
	}
	got, claimed, err := s.ChallengeClaim(ctx, store.SignedUse{}, a.Challenges[0].ID)
	if err != nil || !claimed || got.Status != acme.StatusProcessing {
		t.Fatalf("ChallengeClaim after a serialization failure = %+v, %v, %v; want claimed, processing", got, claimed, err)
	}
	if n := x.Int(t, `SELECT last_value FROM claim_attempts`); n != 2 {
		t.Fatalf("%d attempts, want 2 (the failure, then the claim)", n)
	}
	if n := x.Int(t, `SELECT count(*) FROM river_job WHERE kind = 'challenge_validate'`); n != 1 {
		t.Fatalf("%d challenge_validate jobs, want 1", n)
	}

	x.Exec(t, `SELECT setval('claim_attempts', 1, false)`)
	if err := s.ChallengeVerdict(ctx, store.Verdict{ChallengeID: got.ID, Status: acme.StatusValid}); err != nil {
		t.Fatalf("ChallengeVerdict after a serialization failure: %v", err)
	}
	if n := x.Int(t, `SELECT last_value FROM claim_attempts`); n != 2 {
		t.Fatalf("%d verdict attempts, want 2 (the failure, then the verdict)", n)
	}
	if o, err := s.OrderByID(ctx, o.ID); err != nil || o.Status != acme.StatusReady {
		t.Fatalf("the order after the retried verdict: %+v, %v; want ready", o, err)
	}
}
