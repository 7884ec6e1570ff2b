package operator_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite"

	"github.com/hallmark-ca/hallmark/admin/operator"
	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/storetest"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// faultSQL makes the database refuse the audit row of actor admin:faulty:
// the action's change is written, then its audit insert fails, as a
// database that fails at that point would.
var faultSQL = map[string]string{
	"sqlite": `CREATE TRIGGER fault BEFORE INSERT ON audit_events WHEN NEW.actor = 'admin:faulty'
BEGIN SELECT RAISE(ABORT, 'injected fault'); END`,
	"postgres": `CREATE FUNCTION fault() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF NEW.actor = 'admin:faulty' THEN RAISE EXCEPTION 'injected fault'; END IF; RETURN NEW; END $$;
CREATE TRIGGER fault BEFORE INSERT ON audit_events FOR EACH ROW EXECUTE FUNCTION fault()`,
}

func execSQL(t *testing.T, url, q string) {
	t.Helper()
	ctx := context.Background()
	if path, ok := strings.CutPrefix(url, "sqlite:"); ok {
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// TestActionsAuditedAtomically: an operator's action that fails leaves
// neither its change nor an audit row; the same action committed has both.
// The abandon's job cancel (River's, in the store's transaction), the
// challenge's failure and the row go together.
func TestActionsAuditedAtomically(t *testing.T) {
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
			rows := func(action string) int {
				evs, _, err := db.Store.AuditFind(ctx, store.AuditFilter{Action: action}, store.Page{})
				if err != nil {
					t.Fatal(err)
				}
				return len(evs)
			}
			acct, challengeID, jobID := claimedChallenge(t, db.Store)

			if _, _, err := operator.AbandonJob(ctx, st, db.Queue, jobID, "admin:faulty", ""); err == nil || !strings.Contains(err.Error(), "injected fault") {
				t.Fatalf("AbandonJob with a fault = %v, want the fault", err)
			}
			if j, _ := jobs.Show(ctx, db.Queue, jobID); j.State == "cancelled" {
				t.Fatalf("a failed abandon cancelled the job: %+v", j)
			}
			if ch, _ := storetest.ChallengeByID(ctx, db.Store, challengeID); ch.Status != acme.StatusProcessing {
				t.Fatalf("a failed abandon left the challenge %s", ch.Status)
			}
			if _, err := operator.RetryJob(ctx, st, db.Queue, jobID, "admin:faulty"); err == nil {
				t.Fatal("RetryJob with a fault succeeded")
			}
			if _, err := operator.DeactivateAccount(ctx, st, acct.ID, "admin:faulty"); err == nil {
				t.Fatal("DeactivateAccount with a fault succeeded")
			}
			if a, _ := db.Store.AccountByID(ctx, acct.ID); a.Status != acme.StatusValid {
				t.Fatalf("a failed deactivation left the account %s", a.Status)
			}
			if n := rows(operator.ActionJobAbandon) + rows(operator.ActionAccountDeactivate); n != 0 {
				t.Fatalf("failed actions left %d audit rows", n)
			}

			if _, failed, err := operator.AbandonJob(ctx, st, db.Queue, jobID, "admin:alice", ""); err != nil || !failed {
				t.Fatalf("AbandonJob = %v, %v", failed, err)
			}
			if j, _ := jobs.Show(ctx, db.Queue, jobID); j.State != "cancelled" {
				t.Fatalf("the abandoned job is %s, want cancelled", j.State)
			}
			if _, err := operator.RetryJob(ctx, st, db.Queue, jobID, "admin:alice"); err != nil {
				t.Fatal(err)
			}
			if _, err := operator.DeactivateAccount(ctx, st, acct.ID, "admin:alice"); err != nil {
				t.Fatal(err)
			}
			for _, a := range []string{operator.ActionJobAbandon, operator.ActionJobRetry, operator.ActionAccountDeactivate} {
				if n := rows(a); n != 1 {
					t.Errorf("%s rows after it committed: %d, want 1", a, n)
				}
			}
			if rep, err := store.VerifyAudit(ctx, db.Store); err != nil || rep.Break != nil {
				t.Fatalf("VerifyAudit = %+v, %v", rep, err)
			}
		})
	}
}

// claimedChallenge is an account with an order whose challenge is being
// validated, and that claim's challenge_validate job.
func claimedChallenge(t *testing.T, st store.Store) (*store.Account, string, int64) {
	t.Helper()
	ctx := context.Background()
	acct, err := st.AccountCreate(ctx, &store.Account{KeyJWK: []byte(`{"kty":"OKP"}`), Thumbprint: "op-thumb", TermsAgreed: true})
	if err != nil {
		t.Fatal(err)
	}
	now, err := st.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := acme.Identifier{Type: acme.IdentifierDNS, Value: "op.example.com"}
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
	ids, _, err := st.JobIDs(ctx, store.JobFilter{Kind: jobs.KindChallengeValidate}, store.Page{})
	if err != nil || len(ids) != 1 {
		t.Fatalf("JobIDs = %v, %v", ids, err)
	}
	return acct, az.Challenges[0].ID, ids[0]
}
