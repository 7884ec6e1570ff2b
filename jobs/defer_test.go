package jobs_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// TestUnavailableDefers: a job whose backend is unavailable is deferred,
// more times than it has attempts, each deferral in its attempt log, and
// succeeds once the backend is back, its subject never failed meanwhile;
// one whose backend stays unavailable past its deadline fails its subject
// with the deadline's problem and is cancelled. Both dialects.
func TestUnavailableDefers(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		t.Run(d, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, d)
			var mu sync.Mutex
			deadlines := map[string]time.Time{
				"back": time.Now().Add(time.Hour),
				"late": time.Now().Add(400 * time.Millisecond),
				"away": time.Now().Add(time.Hour), // never back in this test
			}
			var backCalls atomic.Int32
			reg := &jobs.Registry{}
			err := jobs.Register(reg, func(ctx context.Context, job jobs.Job[workArgs]) error {
				mu.Lock()
				deadline := deadlines[job.Args.Key]
				mu.Unlock()
				if job.Args.Key == "back" && backCalls.Add(1) > 12 {
					return recordVerdict(ctx, e.db, job.Args.Key)
				}
				return jobs.Unavailable(errors.New("PKCS#11 token not present"), deadline)
			})
			if err != nil {
				t.Fatal(err)
			}
			s := fast(e.db, e.q, "w")
			s.RetryBase, s.DeferMax = 5*time.Millisecond, 40*time.Millisecond
			promReg := prometheus.NewRegistry()
			if s.Metrics, err = jobs.NewMetrics(promReg); err != nil {
				t.Fatal(err)
			}
			start(t, e.q, reg, s)
			// "back" has 3 attempts, fewer than its deferrals: none is used.
			enqueue(t, e.db, e.q, workArgs{Key: "back", Attempts: 3})
			enqueue(t, e.db, e.q, workArgs{Key: "late"})
			enqueue(t, e.db, e.q, workArgs{Key: "away"})

			waitFor(t, 60*time.Second, "the deferred job to complete", func() (bool, error) {
				return jobFor(t, e.q, "back").State == "completed", nil
			})
			j := jobFor(t, e.q, "back")
			if j.Deferred != 12 || j.Attempt != 1 {
				t.Errorf("completed job: deferred %d times on attempt %d, want 12 deferrals and attempt 1", j.Deferred, j.Attempt)
			}
			deferredLines := 0
			for _, l := range j.Deferrals {
				if strings.Contains(l.Error, "token not present") {
					deferredLines++
				}
			}
			if deferredLines != 10 || len(j.Errors) != 0 {
				t.Errorf("job's log has %d deferrals (%+v) and %d failed attempts, want the latest 10 deferrals and no failure", deferredLines, j.Deferrals, len(j.Errors))
			}
			var state, problem string
			if err := e.db.Scan(context.Background(), "SELECT state, problem FROM subjects WHERE id = ?", []any{"back"}, &state, &problem); err != nil {
				t.Fatal(err)
			}
			if state != "valid" {
				t.Errorf("subject of the deferred job %s (%s), want valid", state, problem)
			}

			waitFor(t, 30*time.Second, "the job past its deadline to be cancelled", func() (bool, error) {
				return jobFor(t, e.q, "late").State == "cancelled", nil
			})
			if err := e.db.Scan(context.Background(), "SELECT state, problem FROM subjects WHERE id = ?", []any{"late"}, &state, &problem); err != nil {
				t.Fatal(err)
			}
			if state != "invalid" || problem != string(acme.ProblemServerInternal) {
				t.Errorf("subject past its deadline %s with %q, want invalid with serverInternal", state, problem)
			}
			late := jobFor(t, e.q, "late")
			if n := len(late.Errors); n == 0 || !strings.Contains(late.Errors[n-1].Error, "until the deadline") {
				t.Errorf("attempt log of the job past its deadline: %+v", late.Errors)
			}
			checkOutcomes(t, promReg, map[string]float64{jobs.OutcomeExpired: 1, jobs.OutcomeAbandoned: 0, jobs.OutcomeRetried: 0})
			// The gauge's read counts the job still waiting for its backend.
			ds, err := jobs.Depths(context.Background(), e.q)
			if err != nil {
				t.Fatal(err)
			}
			var deferred int64
			for _, d := range ds {
				if d.Kind == "test_work" {
					deferred += d.Deferred
				}
			}
			if deferred != 1 {
				t.Errorf("unfinished deferred jobs read for hallmark_jobs_deferred = %d, want 1 (the one whose backend never came back): %+v", deferred, ds)
			}
		})
	}
}

func TestDeadlineProblemSaysWhy(t *testing.T) {
	at := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	p := jobs.DeadlineProblem(jobs.KindSignerIssue, at)
	want := "the CA could not complete this issuance in time: the backend it needs was unavailable until the order expired at 2026-12-07T06:00:00Z; submit a new order"
	if p.Type != acme.ProblemServerInternal || p.Detail != want {
		t.Errorf("DeadlineProblem = %s %q, want serverInternal %q", p.Type, p.Detail, want)
	}
}
