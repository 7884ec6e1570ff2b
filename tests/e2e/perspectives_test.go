package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hallmark-ca/hallmark/tests/harness"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// perspectiveProfiles are the test's profiles: default requires network
// perspectives, plain does not.
const perspectiveProfiles = `
[profiles.default]
backend = "local"
validity_hours = 240
key_types = ["rsa2048", "p256"]
challenges = ["http-01"]
identifier_types = ["dns"]
perspectives = true

[profiles.plain]
backend = "local"
validity_hours = 240
key_types = ["rsa2048", "p256"]
challenges = ["http-01"]
identifier_types = ["dns"]
`

// TestPerspectivesQuorum is multi-perspective validation end to end on
// PostgreSQL: a primary worker and three perspective workers, each with
// its own resolver. Honest, lego gets a certificate; one perspective
// hijacked (its resolver answers the attacker's address) is outvoted; two
// hijacked fail the validation with a problem naming them. The same for
// CAA records only some perspectives see. A profile without perspectives
// asks none, and its authorization is not reused by the profile that
// requires them. Two processes serving one perspective answer each ask
// once; a perspective whose resolvers are down answers that it could not
// check; one stopped still gives a verdict, at its deadline. The primary's
// metrics count each perspective's part in every verdict.
func TestPerspectivesQuorum(t *testing.T) {
	requireTool(t, "lego", "apt-get install lego")
	const deadline = 4 * time.Second
	q := startQuorum(t, deadline)
	ps := q.ps

	t.Run("honest", func(t *testing.T) {
		q.mustIssue(t, "honest.persp.test")
		q.want(t, "honest.persp.test", map[string]string{"primary": "valid", "east": "valid", "west": "valid", "north": "valid"})
		q.expect("agreed", "east", "west", "north")
	})
	t.Run("one hijacked", func(t *testing.T) {
		ps["east"].dns.SetAddrs("one.persp.test", "127.0.0.2")
		q.mustIssue(t, "one.persp.test")
		q.want(t, "one.persp.test", map[string]string{"primary": "valid", "east": "invalid", "west": "valid", "north": "valid"})
		q.expect("disagreed", "east")
		q.expect("agreed", "west", "north")
	})
	t.Run("two hijacked", func(t *testing.T) {
		ps["east"].dns.SetAddrs("two.persp.test", "127.0.0.2")
		ps["west"].dns.SetAddrs("two.persp.test", "127.0.0.2")
		q.mustFail(t, "two.persp.test", "unauthorized", "east", "west")
		q.want(t, "two.persp.test", map[string]string{"primary": "valid", "east": "invalid", "west": "invalid", "north": "valid"})
		q.expect("disagreed", "east", "west")
		q.expect("agreed", "north")
	})
	t.Run("profile without perspectives", func(t *testing.T) { withoutPerspectives(t, q) })
	t.Run("caa seen by one", func(t *testing.T) {
		ps["north"].dns.SetCAA("caa1.persp.test", 0, "issue", "other-ca.example")
		q.mustIssue(t, "caa1.persp.test")
		q.want(t, "caa1.persp.test", map[string]string{"primary": "valid", "east": "valid", "west": "valid", "north": "invalid"})
		q.expect("agreed", "east", "west")
		q.expect("disagreed", "north")
	})
	t.Run("caa seen by two", func(t *testing.T) {
		ps["west"].dns.SetCAA("caa2.persp.test", 0, "issue", "other-ca.example")
		ps["north"].dns.SetCAA("caa2.persp.test", 0, "issue", "other-ca.example")
		q.mustFail(t, "caa2.persp.test", "caa", "west", "north")
		q.want(t, "caa2.persp.test", map[string]string{"primary": "valid", "east": "valid", "west": "invalid", "north": "invalid"})
		q.expect("agreed", "east")
		q.expect("disagreed", "west", "north")
	})
	t.Run("two processes serve one perspective", func(t *testing.T) { twoProcesses(t, q) })
	t.Run("resolvers down", func(t *testing.T) { resolversDown(t, q) })
	t.Run("one stopped", func(t *testing.T) { oneStopped(t, q) })
	t.Run("two stopped", func(t *testing.T) {
		ps["west"].proc.Stop()
		out, err := q.run(t, "stopped2.persp.test")
		if err == nil || !strings.Contains(out, "serverInternal") ||
			!strings.Contains(out, "west did not answer within 4s") || !strings.Contains(out, "north did not answer within 4s") {
			t.Fatalf("with two of three perspectives stopped: %v, want a serverInternal problem naming both\n%s", err, out)
		}
		q.expect("agreed", "east")
		q.expect("timeout", "west", "north")
	})
	earlierFailed := t.Failed // a failed case fails its parent too
	t.Run("metrics", func(t *testing.T) {
		if earlierFailed() {
			t.Skip("an earlier case failed: the tally would not match")
		}
		perspectiveMetrics(t, q)
	})
}

// startQuorum starts the CA on PostgreSQL with perspectives east, west
// and north, each its own process and DNS server, and the attacker's
// responder.
func startQuorum(t *testing.T, deadline time.Duration) *quorumRun {
	dbURL := testdb.Postgres(t)
	ca := harness.StartCA(t, dbURL, harness.Options{
		Challenge: fmt.Sprintf("\n[challenge.perspectives]\nnames = [\"east\", \"west\", \"north\"]\ndeadline_ms = %d", deadline.Milliseconds()),
		Tables:    perspectiveProfiles,
	})
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	q := &quorumRun{ca: ca, ps: map[string]*perspective{}, path: t.TempDir(), conn: conn, deadline: deadline, counted: map[string]map[string]int{}}
	for _, n := range []string{"east", "west", "north"} {
		q.ps[n] = startPerspective(t, ca, n)
	}
	attacker(t, ca.HTTPPort)
	return q
}

// oneStopped: north stopped never answers; the verdict comes at the
// deadline without it, after the primary's next look (every 200 ms) and
// River's next fetch of the snoozed job (every 250 ms): within slack of
// the deadline, on two busy cores.
func oneStopped(t *testing.T, q *quorumRun) {
	const slack = 2 * time.Second
	q.ps["north"].proc.Stop()
	start := time.Now()
	q.mustIssue(t, "stopped.persp.test")
	took := time.Since(start)
	lag := q.verdictLag(t, "stopped.persp.test")
	t.Logf("issued with north stopped in %s; the verdict %s after the primary's answer (deadline %s)", took.Round(time.Millisecond), lag.Round(time.Millisecond), q.deadline)
	if lag < q.deadline || lag > q.deadline+slack {
		t.Errorf("the verdict came %s after the primary's answer, want within [%s, %s]", lag, q.deadline, q.deadline+slack)
	}
	q.want(t, "stopped.persp.test", map[string]string{"primary": "valid", "east": "valid", "west": "valid"})
	q.expect("agreed", "east", "west")
	q.expect("timeout", "north")
}

// withoutPerspectives: the profile plain asks no perspective, so two
// hijacked do not stop it and none answered; the same account under
// default, which requires perspectives, does not reuse that
// authorization: it validates again, and the two hijacked perspectives
// refuse it.
func withoutPerspectives(t *testing.T, q *quorumRun) {
	q.ps["east"].dns.SetAddrs("plain.persp.test", "127.0.0.2")
	q.ps["west"].dns.SetAddrs("plain.persp.test", "127.0.0.2")
	l := harness.Lego{Bin: requireTool(t, "lego", "apt-get install lego"), Directory: q.ca.BaseURL + "/profile/plain/directory",
		Root: q.ca.Root, Email: "e2e@hallmark.test", Path: q.path}
	if out, err := l.Run(t.Context(), "--domains", "plain.persp.test", "--http", "--http.port", fmt.Sprintf("127.0.0.1:%d", q.ca.HTTPPort), "run"); err != nil {
		t.Fatalf("lego run under profile plain: %v\n%s", err, out)
	}
	q.want(t, "plain.persp.test", map[string]string{})
	q.mustFail(t, "plain.persp.test", "unauthorized", "east", "west")
	q.expect("disagreed", "east", "west")
	q.expect("agreed", "north")
	var list []struct{ Account, Profile, Status string }
	if err := json.Unmarshal([]byte(q.ca.Run("hallmark", "--config", q.ca.Config, "orders", "list", "--json", "--identifier", "plain.persp.test")), &list); err != nil ||
		len(list) != 2 || list[0].Account != list[1].Account || list[0].Profile == list[1].Profile {
		t.Fatalf("orders of plain.persp.test: %+v, %v; want one of each profile, of one account", list, err)
	}
}

// twoProcesses: a second process serves east beside the first, both
// taking east's jobs from the one database. Each ask is answered once:
// one perspective_check job for east per challenge, run at its first
// attempt, and one check for it between the two processes' logs. With the
// first stopped, the second alone answers for east.
func twoProcesses(t *testing.T, q *quorumRun) {
	east := q.ps["east"]
	second, health := servePerspective(t, q.ca, "east", east.dns.Addr, "perspective-east-2")
	waitReady(t, second, health)
	names := []string{"pair1.persp.test", "pair2.persp.test", "pair3.persp.test", "alone.persp.test"}
	for i, name := range names {
		if i == len(names)-1 {
			east.proc.Stop()
		}
		q.mustIssue(t, name)
		q.want(t, name, map[string]string{"primary": "valid", "east": "valid", "west": "valid", "north": "valid"})
		q.expect("agreed", "east", "west", "north")
	}
	ran := [2]int{}
	for i, name := range names {
		id := q.challengeOf(t, name)
		var jobs, attempts int
		var completed bool
		// River marks a job completed after its handler returns, and the
		// primary may decide from the recorded answer before that.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			err := q.conn.QueryRow(context.Background(), `SELECT count(*), COALESCE(max(attempt), 0), COALESCE(bool_and(state = 'completed'), false)
FROM river_job WHERE kind = 'perspective_check' AND args->>'challenge_id' = $1 AND args->>'perspective' = 'east'`, id).Scan(&jobs, &attempts, &completed)
			if err != nil {
				t.Fatal(err)
			}
			if completed || time.Now().After(deadline) {
				break
			}
		}
		if jobs != 1 || attempts != 1 || !completed {
			t.Errorf("%s: %d perspective_check jobs for east, at most attempt %d, all completed %v; want one, completed at its first attempt", name, jobs, attempts, completed)
		}
		a, b := answeredIn(east.proc.Log(), id), answeredIn(second.Log(), id)
		ran[0], ran[1] = ran[0]+a, ran[1]+b
		if a+b != 1 {
			t.Errorf("%s: east's first process checked challenge %s %d times, its second %d; want once between them", name, id, a, b)
		}
		if i == len(names)-1 && b != 1 {
			t.Errorf("%s: with the first process stopped the second did not answer for east", name)
		}
	}
	t.Logf("east's checks: %d by the first process, %d by the second", ran[0], ran[1])
	east.proc.Start(t) // both serve east from here on
}

// resolversDown: north restarted with a resolver nothing listens on cannot
// run the check. It answers so (outcome error), which does not
// corroborate, and east and west carry the quorum. Then north is itself
// again.
func resolversDown(t *testing.T, q *quorumRun) {
	north := q.ps["north"]
	north.proc.Stop()
	blind, health := servePerspective(t, q.ca, "north", fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t)), "perspective-north-blind")
	waitReady(t, blind, health)
	q.mustIssue(t, "blind.persp.test")
	blind.Stop()
	north.proc.Start(t)
	waitReady(t, north.proc, north.health)
	q.want(t, "blind.persp.test", map[string]string{"primary": "valid", "east": "valid", "west": "valid", "north": "error"})
	q.expect("agreed", "east", "west")
	q.expect("error", "north")
}

// perspectiveMetrics scrapes the primary's /metrics:
// hallmark_perspective_answers_total has counted each perspective's part
// in every verdict the test saw, by result, and
// hallmark_perspective_latency_seconds has one observation for each answer
// that came in time.
func perspectiveMetrics(t *testing.T, q *quorumRun) {
	code, page := getURL(t, "http://"+q.ca.Health+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("the primary's /metrics: %d", code)
	}
	for _, n := range []string{"east", "west", "north"} {
		answered := 0
		for _, r := range []string{"agreed", "disagreed", "error", "timeout"} {
			want := q.counted[n][r]
			if r != "timeout" {
				answered += want
			}
			labels := fmt.Sprintf("perspective=%q,result=%q", n, r)
			if got := metric(page, "hallmark_perspective_answers_total", labels); got != float64(want) {
				t.Errorf("hallmark_perspective_answers_total{%s} = %v, want %d", labels, got, want)
			}
		}
		labels := fmt.Sprintf("perspective=%q", n)
		if got := metric(page, "hallmark_perspective_latency_seconds_count", labels); got != float64(answered) {
			t.Errorf("hallmark_perspective_latency_seconds_count{%s} = %v, want %d answers in time", labels, got, answered)
		}
		if got := metric(page, "hallmark_perspective_latency_seconds_sum", labels); got <= 0 {
			t.Errorf("hallmark_perspective_latency_seconds_sum{%s} = %v, want the time of %d checks", labels, got, answered)
		}
	}
}
