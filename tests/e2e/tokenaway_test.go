package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hallmark-ca/hallmark/tests/harness"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// dbClock moves a PostgreSQL database's clock for every session that
// connects after install: now() resolves, ahead of pg_catalog's, to a
// function of the test's that adds a skew. Hallmark's SQL and River's read
// the time through now(), so orders expire, jobs fall due and heartbeats
// lapse by the moved clock, while no process sleeps.
type dbClock struct {
	conn *pgx.Conn
	skew time.Duration
}

func installDBClock(t *testing.T, dbURL string) *dbClock {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	var db string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE SCHEMA testclock`,
		`CREATE TABLE testclock.skew (d interval NOT NULL)`,
		`INSERT INTO testclock.skew VALUES ('0 seconds')`,
		`CREATE FUNCTION testclock.now() RETURNS timestamptz LANGUAGE sql STABLE AS 'SELECT pg_catalog.now() + (SELECT d FROM testclock.skew)'`,
		// public stays first, so tables are still created there.
		fmt.Sprintf(`ALTER DATABASE %s SET search_path = public, testclock, pg_catalog`, pgx.Identifier{db}.Sanitize()),
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return &dbClock{conn: conn}
}

// advance moves the database's clock d further ahead.
func (c *dbClock) advance(t *testing.T, d time.Duration) {
	t.Helper()
	c.skew += d
	if _, err := c.conn.Exec(context.Background(), `UPDATE testclock.skew SET d = make_interval(secs => $1)`, c.skew.Seconds()); err != nil {
		t.Fatal(err)
	}
}

// issueJob is an order's signer_issue job as the test watches it.
type issueJob struct {
	jobID     int64
	state     string
	deferrals int
	attempt   int
	order     string // the order's status
	expires   time.Time
	problem   string // the order's error, JSON
}

// issueJobOf reads the signer_issue job of the order for name, if any.
func issueJobOf(t *testing.T, conn *pgx.Conn, name string) (issueJob, bool) {
	t.Helper()
	var j issueJob
	err := conn.QueryRow(context.Background(), `SELECT j.id, j.state::text, j.attempt, COALESCE((j.metadata->'hallmark_deferrals'->>'count')::int, 0),
  o.status, o.expires_at, o.error
  FROM orders o JOIN order_identifiers i ON i.order_id = o.id
  JOIN river_job j ON j.kind = 'signer_issue' AND j.args->>'order_id' = o.id
  WHERE i.value = $1 ORDER BY j.id DESC LIMIT 1`, name).Scan(&j.jobID, &j.state, &j.attempt, &j.deferrals, &j.order, &j.expires, &j.problem)
	if err == pgx.ErrNoRows {
		return j, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return j, true
}

// waitIssueJob polls until ok holds of name's job, failing after a minute.
func waitIssueJob(t *testing.T, conn *pgx.Conn, name, what string, ok func(issueJob) bool) issueJob {
	t.Helper()
	var last issueJob
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		j, found := issueJobOf(t, conn, name)
		if found && ok(j) {
			return j
		}
		last = j
		if found && j.order != "processing" {
			t.Fatalf("waiting for %s: order %s is %s (%s)", what, name, j.order, j.problem)
		}
	}
	var dbg string
	_ = conn.QueryRow(context.Background(), `SELECT format('now %s; job %s sched %s; leader %s', now(), (SELECT state FROM river_job WHERE id = $1), (SELECT scheduled_at FROM river_job WHERE id = $1), (SELECT string_agg(leader_id || ' exp ' || expires_at, ',') FROM river_leader))`, last.jobID).Scan(&dbg)
	t.Fatalf("%s: not within a minute; last %+v; %s", what, last, dbg)
	return last
}

var deferredMetricRE = regexp.MustCompile(`hallmark_jobs_total\{kind="signer_issue",outcome="deferred"\} (\S+)`)

// TestTokenAwayDefersOrder: with its PKCS#11 token (SoftHSM2) away for 15
// minutes of the database's clock, an order stays processing, its signing
// job deferred again after each move of the clock, never failed; it
// becomes valid once the token is back, and the job's attempt log and the
// worker's metrics show the deferrals. With the token away past an
// order's expiry, the order becomes invalid with the problem that says
// the CA could not sign in time. PostgreSQL only: SQLite's clock cannot
// be moved from outside.
func TestTokenAwayDefersOrder(t *testing.T) {
	module, tokenDir := softHSM(t)
	dbURL := testdb.Postgres(t)
	clock := installDBClock(t, dbURL)
	ca := harness.StartCA(t, dbURL, harness.Options{Tables: fmt.Sprintf(`
[profiles.hsm]
backend = "pkcs11"
signer = "softhsm"
validity_hours = 72
key_types = ["p256"]
challenges = ["dns-01"]

[backends.softhsm]
type = "pkcs11"
module = %q
token_label = "hallmark-e2e"
pin_env = "HALLMARK_E2E_PIN"
key_label = "e2e-issuer"
cert = "ca/softhsm.pem"
`, module), Worker: "defer_max_ms = 6000"})
	t.Log(strings.TrimSpace(ca.Run("hallmark-worker", "--config", ca.Config, "ca", "init", "--pkcs11", "softhsm", "--key-type", "p256")))
	ca.Stop("worker")
	ca.Start("worker")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if code, _ := workerReady(t, ca); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the worker did not mount the token within 30s")
		}
	}
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	c := acmeAccount(t, ca)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	away := tokenDir + ".away"
	tokenAway := func() {
		if err := os.Rename(tokenDir, away); err != nil {
			t.Fatal(err)
		}
	}
	tokenBack := func() { _ = os.Rename(away, tokenDir) }
	defer tokenBack()
	type result struct {
		chain [][]byte
		err   error
	}

	t.Run("token back before the order expires", func(t *testing.T) {
		tokenAway()
		done := make(chan result, 1)
		go func() { chain, _, err := obtain(ctx, ca, c, "hsm", "away.backends.test"); done <- result{chain, err} }()
		j := waitIssueJob(t, conn, "away.backends.test", "the first deferral", func(j issueJob) bool { return j.deferrals > 0 })
		for step := 1; step <= 3; step++ {
			clock.advance(t, 5*time.Minute)
			prev := j.deferrals
			j = waitIssueJob(t, conn, "away.backends.test", fmt.Sprintf("a deferral after %d minutes", 5*step),
				func(j issueJob) bool { return j.deferrals > prev })
			t.Logf("database clock +%s: order %s, job %d %s, deferred %d times", clock.skew, j.order, j.jobID, j.state, j.deferrals)
			if j.attempt > 1 {
				t.Errorf("the deferred job is on attempt %d, want at most 1: a deferral uses no attempt", j.attempt)
			}
		}
		tokenBack()
		r := <-done
		if r.err != nil {
			t.Fatalf("the order did not become valid once the token was back: %v", r.err)
		}
		if j, _ := issueJobOf(t, conn, "away.backends.test"); j.order != "valid" {
			t.Fatalf("order %s once the token was back, want valid", j.order)
		}
		show := ca.Run("hallmark", "--config", ca.Config, "jobs", "show", strconv.FormatInt(j.jobID, 10))
		if !strings.Contains(show, "deferred: ") || !strings.Contains(show, "PKCS#11") {
			t.Errorf("`hallmark jobs show %d` does not list the deferrals:\n%s", j.jobID, show)
		}
		_, metrics := getURL(t, "http://"+ca.Health+"/metrics")
		if m := deferredMetricRE.FindStringSubmatch(metrics); m == nil || m[1] == "0" {
			t.Errorf("the worker's metrics count no deferred signer_issue run: %v", m)
		}
	})

	t.Run("order expires first", func(t *testing.T) {
		tokenAway()
		done := make(chan result, 1)
		go func() { chain, _, err := obtain(ctx, ca, c, "hsm", "late.backends.test"); done <- result{chain, err} }()
		j := waitIssueJob(t, conn, "late.backends.test", "the first deferral", func(j issueJob) bool { return j.deferrals > 0 })
		var now time.Time
		if err := conn.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
			t.Fatal(err)
		}
		clock.advance(t, j.expires.Sub(now)+time.Minute)
		var status, problem string
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
			if err := conn.QueryRow(ctx, "SELECT status, error FROM orders WHERE id = (SELECT args->>'order_id' FROM river_job WHERE id = $1)", j.jobID).Scan(&status, &problem); err != nil {
				t.Fatal(err)
			}
			if status != "processing" || time.Now().After(deadline) {
				break
			}
		}
		if status != "invalid" || !strings.Contains(problem, "serverInternal") || !strings.Contains(problem, "could not complete this issuance in time") {
			t.Fatalf("order past its expiry with the token away: %s %s, want invalid with the CA could not sign in time", status, problem)
		}
		r := <-done
		if r.err == nil || !strings.Contains(r.err.Error(), "in time") {
			t.Errorf("the client's error: %v, want the problem saying the CA could not sign in time", r.err)
		}
		tokenBack()
	})
}

func getURL(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
