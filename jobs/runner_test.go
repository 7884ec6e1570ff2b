package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
)

// TestFollowAddsQueueAndSchedule: a started runner told to follow settings
// with another queue and a scheduled job of that queue inserts the job and
// works it, where before it worked neither; following the same settings
// again inserts no second schedule.
func TestFollowAddsQueueAndSchedule(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		t.Run(d, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, d)
			ran := make(chan string, 10)
			reg := &jobs.Registry{}
			if err := jobs.Register(reg, func(ctx context.Context, job jobs.Job[jobs.CRLGenerateArgs]) error {
				ran <- job.Args.IssuerID
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			s := fast(e.db, e.q, "w")
			s.Queues = []string{jobs.QueueMaintenance}
			r := start(t, e.q, reg, s)
			later := jobs.Scheduled{Every: time.Hour, Args: jobs.CRLGenerateArgs{IssuerID: "added"}}
			s.Queues = append(s.Queues, jobs.IssuerQueue("added"))
			s.Scheduled = []jobs.Scheduled{later}
			for range 2 {
				if err := r.Follow(s); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case id := <-ran:
				if id != "added" {
					t.Fatalf("ran the CRL job of %q", id)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the scheduled job of the followed queue did not run")
			}
			time.Sleep(500 * time.Millisecond)
			if n := count(t, e.db, "SELECT count(*) FROM river_job WHERE kind = 'crl_generate'"); n != 1 {
				t.Fatalf("%d crl_generate jobs inserted, want 1 (Follow twice schedules once)", n)
			}
		})
	}
}
