package jobs_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/hallmark-ca/hallmark/jobs"
)

// BenchmarkIdle measures what an idle worker costs PostgreSQL: a worker as
// the real one starts (the validate and maintenance queues, two profile
// queues, housekeeping every minute and a CRL job every hour) with nothing
// to do, watched for 10 s per iteration after it settles. It reports
// statements per second and their execution time (ms of database time per
// second); -v lists the statements.
//
//	go test ./jobs -run '^$' -bench Idle -benchtime=1x -count=1 -v
func BenchmarkIdle(b *testing.B) {
	const window = 10 * time.Second
	e := newEnv(b, "postgres")
	stats := newPGStats(b, e.db)
	if stats == nil {
		b.Skip("needs pg_stat_statements")
	}
	reg := &jobs.Registry{}
	for _, err := range []error{
		jobs.Register(reg, func(context.Context, jobs.Job[jobs.ChallengeValidateArgs]) error { return nil }),
		jobs.Register(reg, func(context.Context, jobs.Job[jobs.SignerIssueArgs]) error { return nil }),
		jobs.Register(reg, func(context.Context, jobs.Job[jobs.HousekeepingArgs]) error { return nil }),
		jobs.Register(reg, func(context.Context, jobs.Job[jobs.CRLGenerateArgs]) error { return nil }),
	} {
		if err != nil {
			b.Fatal(err)
		}
	}
	s := jobs.Settings{
		WorkerID: "idle-worker",
		Queues:   []string{jobs.QueueValidate, jobs.QueueMaintenance, jobs.ProfileQueue("a"), jobs.ProfileQueue("b")},
		Subjects: subjects{e.db, e.q},
		Periodic: []*river.PeriodicJob{
			jobs.HousekeepingEvery(time.Minute),
			river.NewPeriodicJob(river.PeriodicInterval(time.Hour), func() (river.JobArgs, *river.InsertOpts) {
				return jobs.CRLGenerateArgs{IssuerID: "i"}, nil
			}, &river.PeriodicJobOpts{RunOnStart: true}),
		},
	}
	if v, err := time.ParseDuration(os.Getenv("HALLMARK_BENCH_FETCH_POLL")); err == nil {
		s.FetchPollInterval = v
	}
	start(b, e.q, reg, s)
	// Settle: leader elected, the run-on-start jobs inserted and worked.
	time.Sleep(3 * time.Second)
	stats.reset(b)
	b.ResetTimer()
	for range b.N {
		time.Sleep(window)
	}
	b.StopTimer()
	secs := float64(b.N) * window.Seconds()
	report(b, stats.read(b), secs, "s", os.Stdout)
	b.ReportMetric(0, "ns/op")
}
