package jobs_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
)

// testSnoozeUsesNoAttempt: a job snoozed more times than it has attempts
// runs again after each snooze, no sooner, and is neither discarded nor
// abandoned: it completes on its first attempt.
func testSnoozeUsesNoAttempt(t *testing.T, dialect string) {
	e := newEnv(t, dialect)
	const snoozes, delay = 5, 50 * time.Millisecond
	var mu sync.Mutex
	var starts []time.Time
	reg := &jobs.Registry{}
	err := jobs.Register(reg, func(ctx context.Context, job jobs.Job[workArgs]) error {
		mu.Lock()
		starts = append(starts, time.Now())
		runs := len(starts)
		mu.Unlock()
		if job.Attempt != 1 {
			return fmt.Errorf("run %d is attempt %d, want 1: a snooze is no attempt", runs, job.Attempt)
		}
		if runs <= snoozes {
			return jobs.Snooze(delay)
		}
		return recordVerdict(ctx, e.db, job.Args.Key)
	})
	if err != nil {
		t.Fatal(err)
	}
	start(t, e.q, reg, fast(e.db, e.q, "w"))
	enqueue(t, e.db, e.q, workArgs{Key: "waits", Attempts: 2})
	waitFor(t, 30*time.Second, "the snoozed job to complete", func() (bool, error) {
		return jobFor(t, e.q, "waits").State == "completed", nil
	})
	j := jobFor(t, e.q, "waits")
	if j.Attempt != 1 || len(j.Errors) != 0 {
		t.Errorf("completed on attempt %d with %d errors, want attempt 1 and none: a snooze is no attempt", j.Attempt, len(j.Errors))
	}
	if got := count(t, e.db, "SELECT count(*) FROM subjects WHERE id = 'waits' AND state = 'valid'"); got != 1 {
		t.Error("the snoozed job's subject has no verdict")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(starts) != snoozes+1 {
		t.Fatalf("the handler ran %d times, want %d", len(starts), snoozes+1)
	}
	for i := 1; i < len(starts); i++ {
		if gap := starts[i].Sub(starts[i-1]); gap < delay {
			t.Errorf("run %d came %s after the snooze before it, want at least %s", i, gap, delay)
		}
	}
}
