package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// TestQueue runs every behaviour on both dialects:
// TestQueue/postgres/<name> and TestQueue/sqlite/<name>.
func TestQueue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		run  func(t *testing.T, dialect string)
	}{
		{"InsertCommitsWithTheRow", testInsertCommitsWithTheRow},
		{"EachJobRunsOnceAcrossFourProcesses", testEachJobRunsOnce},
		{"KilledWorkerLosesJobToAnother", testKilledWorker},
		{"JobCompletesAfterItsVerdict", testJobCompletesAfterItsVerdict},
		{"BrokenHandlerAbandons", testBrokenHandlerAbandons},
		{"RecoverRequeuesStranded", testRecover},
		{"CouldNotRunRetriesWithBackoff", testCouldNotRunRetries},
		{"SnoozeUsesNoAttempt", testSnoozeUsesNoAttempt},
		{"StartRefusesWithoutSubjects", testStartRefusesWithoutSubjects},
		{"AdminRetryAndCancel", testAdminRetryAndCancel},
		{"PeriodicHousekeepingRuns", testPeriodicHousekeeping},
		{"InsertNotificationStartsJob", testInsertNotificationStartsJob},
	}
	for _, d := range dialects {
		t.Run(d, func(t *testing.T) {
			t.Parallel()
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.run(t, d)
				})
			}
		})
	}
}

// recordVerdict is a handler's verdict: the subject becomes valid, in one
// transaction. Like the worker's handlers it does nothing on a subject that
// is no longer processing: a job whose verdict committed just before its
// worker died runs again.
func recordVerdict(ctx context.Context, db sqlDB, key string) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return jobs.CouldNotRun(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var state string
	if err := tx.Scan(ctx, "SELECT state FROM subjects WHERE id = ?", []any{key}, &state); err != nil {
		return jobs.CouldNotRun(err)
	}
	if state != "processing" {
		return nil
	}
	if err := tx.Exec(ctx, "INSERT INTO verdicts (id) VALUES (?)", key); err != nil {
		return err
	}
	if err := tx.Exec(ctx, "UPDATE subjects SET state = 'valid' WHERE id = ?", key); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func testInsertCommitsWithTheRow(t *testing.T, dialect string) {
	e := newEnv(t, dialect)
	ctx := context.Background()
	insert := func(key string, commit bool) bool {
		tx, err := e.db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Exec(ctx, "INSERT INTO subjects (id, state) VALUES (?, 'processing') ON CONFLICT (id) DO NOTHING", key); err != nil {
			t.Fatal(err)
		}
		_, inserted, err := e.q.Inserter().InsertTx(ctx, tx.Tx(), workArgs{Key: key})
		if err != nil {
			t.Fatalf("InsertTx: %v", err)
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		return inserted
	}
	jobsOf := func() int64 { return count(t, e.db, "SELECT count(*) FROM river_job WHERE kind = 'test_work'") }
	rowsOf := func() int64 { return count(t, e.db, "SELECT count(*) FROM subjects") }

	if !insert("a", false) {
		t.Fatal("first insert reported as a duplicate")
	}
	if r, j := rowsOf(), jobsOf(); r != 0 || j != 0 {
		t.Fatalf("after rollback: %d rows, %d jobs; want neither", r, j)
	}
	if !insert("a", true) {
		t.Fatal("insert after rollback reported as a duplicate")
	}
	if r, j := rowsOf(), jobsOf(); r != 1 || j != 1 {
		t.Fatalf("after commit: %d rows, %d jobs; want both", r, j)
	}
	// No worker runs: the job waits, and the depth the metrics read says so.
	ds, err := jobs.Depths(ctx, e.q)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].Kind != "test_work" || ds[0].State != "available" || ds[0].Count != 1 || ds[0].Queue != testQueue ||
		ds[0].Oldest < 0 || ds[0].Oldest > time.Minute {
		t.Errorf("Depths = %+v, want one available test_work job in %s, due moments ago", ds, testQueue)
	}
	if insert("a", true) {
		t.Fatal("second job for a subject with an outstanding job was inserted; uniqueness must skip it")
	}
	if j := jobsOf(); j != 1 {
		t.Fatalf("after duplicate insert: %d jobs, want 1", j)
	}
	if _, _, err := e.q.Inserter().InsertTx(ctx, "not a tx", workArgs{Key: "b"}); err == nil {
		t.Fatal("InsertTx accepted a transaction of the wrong type")
	}
}

// testInsertNotificationStartsJob checks that an insert's notification,
// not the fetch poll (a minute here), starts its job: inserted by another
// process and by the worker's own (on SQLite both seen through the
// outbox's highest id).
func testInsertNotificationStartsJob(t *testing.T, dialect string) {
	e := newEnv(t, dialect)
	workerDB, workerQ := e.open(t)
	started := make(chan string, 2)
	reg := &jobs.Registry{}
	if err := jobs.Register(reg, func(ctx context.Context, job jobs.Job[workArgs]) error {
		started <- job.Args.Key
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s := fast(workerDB, workerQ, "notified-worker")
	s.FetchPollInterval = time.Minute
	start(t, workerQ, reg, s)
	// The worker fetches once as it starts; let that pass.
	time.Sleep(200 * time.Millisecond)
	for _, c := range []struct {
		key string
		db  sqlDB
		q   jobs.Queue
	}{{"other-process", e.db, e.q}, {"same-process", workerDB, workerQ}} {
		enqueue(t, c.db, c.q, workArgs{Key: c.key})
		select {
		case key := <-started:
			if key != c.key {
				t.Fatalf("started %s, want %s", key, c.key)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("job %s did not start within 10 s: its notification was lost", c.key)
		}
	}
}

func testEachJobRunsOnce(t *testing.T, dialect string) {
	const procs = 4
	n := 2000
	if testing.Short() {
		n = 400 // -short (and -race runs): the full count takes ~30 s on SQLite across processes
	}
	e := newEnv(t, dialect)
	var dup, runs atomic.Int64
	for i := range procs {
		db, q := e.open(t)
		reg := &jobs.Registry{}
		id := fmt.Sprintf("proc-%d", i)
		err := jobs.Register(reg, func(ctx context.Context, job jobs.Job[workArgs]) error {
			runs.Add(1)
			tx, err := db.Begin(ctx)
			if err != nil {
				return jobs.CouldNotRun(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			if err := tx.Exec(ctx, "INSERT INTO runs (job_key, worker) VALUES (?, ?)", job.Args.Key, id); err != nil {
				if strings.Contains(strings.ToLower(err.Error()), "unique") || strings.Contains(err.Error(), "duplicate") {
					dup.Add(1)
					return err
				}
				return jobs.CouldNotRun(err)
			}
			if err := tx.Commit(ctx); err != nil {
				return jobs.CouldNotRun(err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		start(t, q, reg, fast(db, q, id))
	}

	began := time.Now()
	ctx := context.Background()
	for b := 0; b < n; b += 100 {
		tx, err := e.db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := b; i < b+100 && i < n; i++ {
			if _, _, err := e.q.Inserter().InsertTx(ctx, tx.Tx(), workArgs{Key: fmt.Sprintf("job-%05d", i)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 3*time.Minute, "every job completed", func() (bool, error) {
		return count(t, e.db, "SELECT count(*) FROM river_job WHERE state = 'completed'") == int64(n), nil
	})
	elapsed := time.Since(began)

	if d := dup.Load(); d != 0 {
		t.Errorf("%d jobs ran twice", d)
	}
	if got := count(t, e.db, "SELECT count(DISTINCT job_key) FROM runs"); got != int64(n) {
		t.Errorf("%d distinct jobs ran, want %d", got, n)
	}
	if got := count(t, e.db, "SELECT count(*) FROM runs"); got != int64(n) {
		t.Errorf("%d runs recorded, want %d", got, n)
	}
	workers, err := e.db.Strings(ctx, "SELECT DISTINCT worker FROM runs")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d jobs over %d processes in %s (%.0f jobs/s); %d handler calls; processes that worked: %v",
		dialect, n, procs, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), runs.Load(), workers)
}

const (
	helperDialectEnv = "HALLMARK_JOBS_HELPER_DIALECT"
	helperURLEnv     = "HALLMARK_JOBS_HELPER_URL"
	doomedWorkerID   = "doomed-worker"
	// decidedKey is the subject whose verdict the doomed worker commits
	// before it dies.
	decidedKey = "decided"
)

// TestHelperWorker is not a test: it is the worker process that
// KilledWorkerLosesJobToAnother starts and kills with SIGKILL mid-job.
func TestHelperWorker(t *testing.T) {
	dialect := os.Getenv(helperDialectEnv)
	if dialect == "" {
		t.Skip("helper process for TestQueue/*/KilledWorkerLosesJobToAnother; runs only when started by it")
	}
	db, q := openEnv(t, dialect, os.Getenv(helperURLEnv))
	reg := &jobs.Registry{}
	if err := jobs.Register(reg, func(ctx context.Context, job jobs.Job[workArgs]) error {
		if job.Args.Key == decidedKey {
			// Dies after its verdict committed, before River marks the
			// job completed.
			if err := recordVerdict(ctx, db, job.Args.Key); err != nil {
				return err
			}
		}
		<-ctx.Done() // hangs until killed
		return jobs.CouldNotRun(ctx.Err())
	}); err != nil {
		t.Fatal(err)
	}
	s := fast(db, q, doomedWorkerID)
	s.JobTimeout, s.RescueAfter = time.Minute, 2*time.Minute
	start(t, q, reg, s)
	time.Sleep(90 * time.Second) // the parent kills us long before
}

func testKilledWorker(t *testing.T, dialect string) {
	if testing.Short() {
		t.Skip("waits for leader expiry and the rescuer (~20 s)")
	}
	e := newEnv(t, dialect)
	enqueue(t, e.db, e.q, workArgs{Key: "hostage"})
	enqueue(t, e.db, e.q, workArgs{Key: decidedKey})

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWorker$")
	cmd.Env = append(os.Environ(), helperDialectEnv+"="+dialect, helperURLEnv+"="+e.url)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the worker process: %v", err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	waitFor(t, 30*time.Second, "the worker process to start both jobs and commit one verdict", func() (bool, error) {
		for _, key := range []string{"hostage", decidedKey} {
			j := jobFor(t, e.q, key)
			if j.State != "running" || !slices.Contains(j.AttemptedBy, doomedWorkerID) {
				return false, nil
			}
		}
		return count(t, e.db, "SELECT count(*) FROM verdicts WHERE id = ?", decidedKey) == 1, nil
	})
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no cleanup, no resignation
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed = true
	killedAt := time.Now()

	// A second worker with a short rescue time takes it over once it is
	// elected leader (the dead one's leadership has to expire first).
	reg := &jobs.Registry{}
	if err := jobs.Register(reg, func(ctx context.Context, job jobs.Job[workArgs]) error {
		return recordVerdict(ctx, e.db, job.Args.Key)
	}); err != nil {
		t.Fatal(err)
	}
	s := fast(e.db, e.q, "rescuer")
	s.JobTimeout, s.RescueAfter = time.Second, 2*time.Second
	start(t, e.q, reg, s)
	// hostage died mid-job: the rescuer records its verdict. decided died
	// after its verdict: the rescuer's run finds it no longer processing and
	// returns nil, and River completes the job.
	for _, key := range []string{"hostage", decidedKey} {
		waitFor(t, 90*time.Second, key+" job to be rescued and completed", func() (bool, error) {
			return jobFor(t, e.q, key).State == "completed", nil
		})
		j := jobFor(t, e.q, key)
		if !slices.Equal(j.AttemptedBy, []string{doomedWorkerID, "rescuer"}) {
			t.Errorf("%s: attempted by %v, want the dead worker then the rescuer", key, j.AttemptedBy)
		}
		if len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Error, "Stuck job rescued") {
			t.Errorf("%s: attempt log %+v, want the rescue recorded", key, j.Errors)
		}
		if got := count(t, e.db, "SELECT count(*) FROM subjects WHERE id = ? AND state = 'valid'", key); got != 1 {
			t.Errorf("%s: the subject did not get its verdict", key)
		}
		if got := count(t, e.db, "SELECT count(*) FROM verdicts WHERE id = ?", key); got != 1 {
			t.Errorf("%s: %d verdicts, want 1", key, got)
		}
	}
	t.Logf("%s: rescued and completed %s after the kill", dialect, time.Since(killedAt).Round(time.Millisecond))
}

// testJobCompletesAfterItsVerdict: the verdict's transaction writes nothing
// to the job, so inside it and just after it commits the job is still
// running; River completes it once the handler returns nil. A verdict whose
// transaction rolled back leaves the job to its retry.
func testJobCompletesAfterItsVerdict(t *testing.T, dialect string) {
	e := newEnv(t, dialect)
	type seen struct {
		attempt                   int
		stateInside, stateOutside string
	}
	var mu sync.Mutex
	var log []seen
	reg := &jobs.Registry{}
	err := jobs.Register(reg, func(ctx context.Context, job jobs.Job[workArgs]) error {
		tx, err := e.db.Begin(ctx)
		if err != nil {
			return jobs.CouldNotRun(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if err := tx.Exec(ctx, "INSERT INTO verdicts (id) VALUES (?)", job.Args.Key); err != nil {
			return err
		}
		var s seen
		s.attempt = job.Attempt
		if err := tx.Scan(ctx, "SELECT state FROM river_job WHERE id = ?", []any{job.ID}, &s.stateInside); err != nil {
			return err
		}
		if job.Attempt == 1 {
			// The verdict's transaction fails.
			if err := tx.Rollback(ctx); err != nil {
				return err
			}
		} else if err := tx.Commit(ctx); err != nil {
			return err
		}
		if err := e.db.Scan(ctx, "SELECT state FROM river_job WHERE id = ?", []any{job.ID}, &s.stateOutside); err != nil {
			return err
		}
		mu.Lock()
		log = append(log, s)
		mu.Unlock()
		if job.Attempt == 1 {
			return jobs.CouldNotRun(errors.New("verdict transaction rolled back"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	start(t, e.q, reg, fast(e.db, e.q, "w"))
	enqueue(t, e.db, e.q, workArgs{Key: "v"})
	waitFor(t, 30*time.Second, "the job to complete", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(log) == 2 && jobFor(t, e.q, "v").State == "completed", nil
	})
	mu.Lock()
	defer mu.Unlock()
	want := []seen{{1, "running", "running"}, {2, "running", "running"}}
	if !slices.Equal(log, want) {
		t.Errorf("job states seen by the handler %+v, want %+v (River completes the job after the handler returns)", log, want)
	}
	if j := jobFor(t, e.q, "v"); j.Attempt != 2 {
		t.Errorf("completed on attempt %d, want 2 (the first verdict rolled back)", j.Attempt)
	}
	if got := count(t, e.db, "SELECT count(*) FROM verdicts"); got != 1 {
		t.Errorf("%d verdicts, want 1", got)
	}
}

func TestRegistryRefusesSecondHandler(t *testing.T) {
	t.Parallel()
	reg := &jobs.Registry{}
	h := func(context.Context, jobs.Job[jobs.ChallengeValidateArgs]) error { return nil }
	if err := jobs.Register(reg, h); err != nil {
		t.Fatalf("first handler: %v", err)
	}
	err := jobs.Register(reg, h)
	if err == nil || !strings.Contains(err.Error(), jobs.KindChallengeValidate) {
		t.Fatalf("second handler for %s: err = %v, want a refusal naming the kind", jobs.KindChallengeValidate, err)
	}
	if err := jobs.Register(reg, func(context.Context, jobs.Job[jobs.SignerIssueArgs]) error { return nil }); err != nil {
		t.Fatalf("handler for another kind: %v", err)
	}
	if got, want := reg.Kinds(), []string{jobs.KindChallengeValidate, jobs.KindSignerIssue}; !slices.Equal(got, want) {
		t.Errorf("Kinds() = %v, want %v", got, want)
	}
}

func testBrokenHandlerAbandons(t *testing.T, dialect string) {
	e := newEnv(t, dialect)
	var calls sync.Map // key → *atomic.Int32
	reg := &jobs.Registry{}
	err := jobs.Register(reg, func(ctx context.Context, job jobs.Job[workArgs]) error {
		n, _ := calls.LoadOrStore(job.Args.Key, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		switch job.Args.Key {
		case "error":
			return errors.New("validator exploded")
		case "panic":
			var m map[string]int
			m["boom"] = 1
		case "unreachable":
			return jobs.CouldNotRun(errors.New("database unreachable"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	settings := fast(e.db, e.q, "w")
	promReg := prometheus.NewRegistry()
	if settings.Metrics, err = jobs.NewMetrics(promReg); err != nil {
		t.Fatal(err)
	}
	start(t, e.q, reg, settings)
	defer checkOutcomes(t, promReg, map[string]float64{jobs.OutcomeAbandoned: 3, jobs.OutcomeRetried: 2, jobs.OutcomeCompleted: 0})
	tests := []struct {
		key      string
		attempts int
		state    string
		calls    int32
		errText  string
	}{
		{"error", 0, "cancelled", 1, "validator exploded"},
		{"panic", 0, "cancelled", 1, "handler panicked"},
		{"unreachable", 3, "discarded", 3, "database unreachable"},
	}
	for _, tc := range tests {
		enqueue(t, e.db, e.q, workArgs{Key: tc.key, Attempts: tc.attempts})
	}
	for _, tc := range tests {
		waitFor(t, 30*time.Second, tc.key+" job to finish", func() (bool, error) {
			return jobFor(t, e.q, tc.key).State == tc.state, nil
		})
		var state, problem string
		if err := e.db.Scan(context.Background(), "SELECT state, problem FROM subjects WHERE id = ?", []any{tc.key}, &state, &problem); err != nil {
			t.Fatal(err)
		}
		if state != "invalid" || problem != string(acme.ProblemServerInternal) {
			t.Errorf("%s: subject %s with %q, want invalid with serverInternal", tc.key, state, problem)
		}
		n, _ := calls.Load(tc.key)
		if got := n.(*atomic.Int32).Load(); got != tc.calls {
			t.Errorf("%s: handler ran %d times, want %d", tc.key, got, tc.calls)
		}
		j := jobFor(t, e.q, tc.key)
		if len(j.Errors) == 0 || !strings.Contains(j.Errors[len(j.Errors)-1].Error, tc.errText) {
			t.Errorf("%s: attempt log %+v, want the error %q", tc.key, j.Errors, tc.errText)
		}
	}
}

// checkOutcomes fails unless hallmark_jobs_total counted want of the
// test_work kind.
func checkOutcomes(t *testing.T, g prometheus.Gatherer, want map[string]float64) {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "hallmark_jobs_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["kind"] == "test_work" {
				got[labels["outcome"]] = m.GetCounter().GetValue()
			}
		}
	}
	for outcome, n := range want {
		if v, ok := got[outcome]; !ok || v != n {
			t.Errorf("hallmark_jobs_total{kind=\"test_work\",outcome=%q} = %v (exported: %v), want %v", outcome, v, ok, n)
		}
	}
}

func testRecover(t *testing.T, dialect string) {
	e := newEnv(t, dialect)
	ctx := context.Background()
	old := time.Now().Add(-time.Hour).UnixMilli()
	for _, row := range []struct {
		id, state string
		ms        int64
	}{
		{"stranded", "processing", old},
		{"fresh", "processing", time.Now().UnixMilli()},
		{"done", "valid", old},
		// Processing for a day: its job lost again and again.
		{"hopeless", "processing", time.Now().Add(-24 * time.Hour).UnixMilli()},
	} {
		if err := e.db.Exec(ctx, "INSERT INTO subjects (id, state, updated_ms) VALUES (?, ?, ?)", row.id, row.state, row.ms); err != nil {
			t.Fatal(err)
		}
	}
	requeued, abandoned, err := jobs.Recover(ctx, subjects{e.db, e.q}, time.Now().Add(-time.Minute), time.Now().Add(-2*time.Hour))
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if requeued != 1 || abandoned != 1 {
		t.Errorf("Recover re-queued %d and abandoned %d subjects, want 1 and 1", requeued, abandoned)
	}
	if j := jobFor(t, e.q, "stranded"); j.State != "available" {
		t.Errorf("re-queued job is %s, want available", j.State)
	}
	if got := count(t, e.db, "SELECT count(*) FROM river_job"); got != 1 {
		t.Errorf("%d jobs, want only the stranded subject's", got)
	}
	// The hopeless one is given up with serverInternal, its client told.
	if got := count(t, e.db, "SELECT count(*) FROM subjects WHERE id = 'hopeless' AND state = 'invalid' AND problem = 'urn:ietf:params:acme:error:serverInternal'"); got != 1 {
		t.Errorf("the subject stranded for a day is not abandoned with serverInternal")
	}

	// The re-queued job is worked like any other.
	reg := &jobs.Registry{}
	if err := jobs.Register(reg, func(ctx context.Context, job jobs.Job[workArgs]) error {
		return recordVerdict(ctx, e.db, job.Args.Key)
	}); err != nil {
		t.Fatal(err)
	}
	start(t, e.q, reg, fast(e.db, e.q, "w"))
	waitFor(t, 30*time.Second, "the re-queued subject's verdict", func() (bool, error) {
		return count(t, e.db, "SELECT count(*) FROM subjects WHERE id = 'stranded' AND state = 'valid'") == 1, nil
	})
}

func testCouldNotRunRetries(t *testing.T, dialect string) {
	e := newEnv(t, dialect)
	var mu sync.Mutex
	var starts []time.Time
	reg := &jobs.Registry{}
	err := jobs.Register(reg, func(ctx context.Context, job jobs.Job[workArgs]) error {
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
		if job.Attempt < 4 {
			return jobs.CouldNotRun(fmt.Errorf("database unreachable (attempt %d)", job.Attempt))
		}
		return recordVerdict(ctx, e.db, job.Args.Key)
	})
	if err != nil {
		t.Fatal(err)
	}
	s := fast(e.db, e.q, "w")
	s.RetryBase = 100 * time.Millisecond
	start(t, e.q, reg, s)
	enqueue(t, e.db, e.q, workArgs{Key: "flaky"})
	waitFor(t, 30*time.Second, "the job to complete after retries", func() (bool, error) {
		return jobFor(t, e.q, "flaky").State == "completed", nil
	})
	j := jobFor(t, e.q, "flaky")
	if j.Attempt != 4 || len(j.Errors) != 3 {
		t.Fatalf("attempt %d with %d errors, want completed on attempt 4 after 3 errors", j.Attempt, len(j.Errors))
	}
	for i, ae := range j.Errors {
		if !strings.Contains(ae.Error, "could not run") || !strings.Contains(ae.Error, fmt.Sprintf("attempt %d", i+1)) {
			t.Errorf("attempt log entry %d: %q", i, ae.Error)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// Attempt n waits between base·2^(n-1)/2 and base·2^(n-1).
	for i := 1; i < len(starts); i++ {
		gap := starts[i].Sub(starts[i-1])
		lo := s.RetryBase << (i - 1) / 2
		if gap < lo {
			t.Errorf("retry %d came %s after the previous attempt, want at least %s", i, gap, lo)
		}
		t.Logf("retry %d after %s", i, gap.Round(time.Millisecond))
	}
	if count(t, e.db, "SELECT count(*) FROM verdicts") != 1 {
		t.Error("no verdict after the successful attempt")
	}
}

func testStartRefusesWithoutSubjects(t *testing.T, dialect string) {
	e := newEnv(t, dialect)
	reg := &jobs.Registry{}
	if err := jobs.Register(reg, func(context.Context, jobs.Job[workArgs]) error { return nil }); err != nil {
		t.Fatal(err)
	}
	s := fast(e.db, e.q, "w")
	s.Subjects = nil
	if r, err := e.q.Start(context.Background(), reg, s); err == nil {
		_ = r.Stop(context.Background())
		t.Fatal("Start without Subjects succeeded; a broken handler could not abandon its subject")
	}
	s = fast(e.db, e.q, "w")
	s.JobTimeout, s.RescueAfter = time.Minute, time.Second
	if r, err := e.q.Start(context.Background(), reg, s); err == nil {
		_ = r.Stop(context.Background())
		t.Fatal("Start with RescueAfter shorter than JobTimeout succeeded")
	}
	if _, err := e.q.Start(context.Background(), &jobs.Registry{}, fast(e.db, e.q, "w")); err == nil {
		t.Fatal("Start with no handlers succeeded")
	}
}

func testAdminRetryAndCancel(t *testing.T, dialect string) {
	e := newEnv(t, dialect)
	ctx := context.Background()
	enqueue(t, e.db, e.q, workArgs{Key: "x"})
	j := jobFor(t, e.q, "x")
	got, err := jobs.Cancel(ctx, e.q, j.ID)
	if err != nil || got.State != "cancelled" {
		t.Fatalf("Cancel: %+v, %v", got, err)
	}
	got, err = jobs.Retry(ctx, e.q, j.ID)
	if err != nil || got.State != "available" {
		t.Fatalf("Retry: %+v, %v", got, err)
	}
	got, err = jobs.Show(ctx, e.q, j.ID)
	if err != nil || got.Kind != "test_work" || got.Queue != testQueue || got.State != "available" {
		t.Fatalf("Show: %+v, %v", got, err)
	}
	if _, err := jobs.Show(ctx, e.q, j.ID+1000); !errors.Is(err, jobs.ErrJobNotFound) {
		t.Fatalf("Show of a missing job: %v, want ErrJobNotFound", err)
	}
	list, err := jobs.List(ctx, e.q, jobs.ListFilter{States: []string{"cancelled"}})
	if err != nil || len(list) != 0 {
		t.Fatalf("List cancelled: %d jobs, %v; want none", len(list), err)
	}
}

func testPeriodicHousekeeping(t *testing.T, dialect string) {
	e := newEnv(t, dialect)
	ran := make(chan int, 10)
	reg := &jobs.Registry{}
	if err := jobs.Register(reg, func(ctx context.Context, job jobs.Job[jobs.HousekeepingArgs]) error {
		ran <- job.Attempt
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s := fast(e.db, e.q, "w")
	s.Queues = []string{jobs.QueueMaintenance}
	s.Subjects = nil // housekeeping has no subject to abandon
	s.Periodic = []*river.PeriodicJob{jobs.HousekeepingEvery(time.Hour)}
	start(t, e.q, reg, s)
	select {
	case <-ran: // enqueued at start by the elected leader, then worked
	case <-time.After(30 * time.Second):
		t.Fatal("housekeeping did not run at start")
	}
}

// TestRunnerPoolCommitsAsync: a PostgreSQL worker runs River's own work on
// sessions that commit without waiting for the WAL flush, and small; the
// store's pool, where jobs are inserted with the store's rows, keeps
// synchronous commits.
func TestRunnerPoolCommitsAsync(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cfg, err := pgxpool.ParseConfig(testdb.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	run, err := jobs.RunnerPool(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	for _, tc := range []struct {
		name string
		p    *pgxpool.Pool
		want string
	}{{"the store's pool", pool, "on"}, {"the runner's pool", run, "off"}} {
		var got string
		if err := tc.p.QueryRow(ctx, "SHOW synchronous_commit").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s: synchronous_commit = %s, want %s", tc.name, got, tc.want)
		}
	}
	if n := run.Config().MaxConns; n > 6 {
		t.Errorf("the runner's pool holds up to %d connections, want at most 6", n)
	}
}
