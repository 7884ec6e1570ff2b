package jobs_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/hallmark-ca/hallmark/jobs"
)

// BenchmarkIdle measures what an idle worker costs: a worker as the real
// one starts (the validate and maintenance queues, two profile queues,
// housekeeping every minute and a CRL job every hour) with nothing to do,
// watched for 10 s per iteration after it settles. It reports the worker
// process's CPU time per second (cpu-ms/s; this test process is the
// worker) and statements per second: on PostgreSQL from
// pg_stat_statements, with their execution time (db-ms/s); on SQLite
// counted at the driver. -v lists the statements.
//
//	go test ./jobs -run '^$' -bench Idle -benchtime=1x -count=1 -v
func BenchmarkIdle(b *testing.B) {
	for _, d := range dialects {
		b.Run(d, func(b *testing.B) { benchIdle(b, d) })
	}
}

func benchIdle(b *testing.B, dialect string) {
	const window = 10 * time.Second
	e := newEnv(b, dialect)
	var (
		db    = e.db
		q     = e.q
		reset func()
		read  func() []stmt
	)
	switch dialect {
	case "postgres":
		stats := newPGStats(b, e.db)
		if stats == nil {
			b.Skip("needs pg_stat_statements")
		}
		reset = func() { stats.reset(b) }
		read = func() []stmt { return stats.read(b) }
	case "sqlite":
		h, stats := openCounted(b, e.url)
		db, q = liteDB{h}, jobs.NewSQLite(h)
		if v, err := time.ParseDuration(os.Getenv("HALLMARK_BENCH_NOTIFY_CHECK")); err == nil {
			q = jobs.NewSQLiteTuned(h, jobs.NotifyEverySQLite, v)
		}
		reset, read = stats.reset, stats.read
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
		Subjects: subjects{db, q},
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
	start(b, q, reg, s)
	// Settle: leader elected, the run-on-start jobs inserted and worked.
	time.Sleep(3 * time.Second)
	reset()
	cpu := cpuTime(b)
	b.ResetTimer()
	for range b.N {
		time.Sleep(window)
	}
	b.StopTimer()
	secs := float64(b.N) * window.Seconds()
	b.ReportMetric(float64(cpuTime(b)-cpu)/float64(time.Millisecond)/secs, "cpu-ms/s")
	report(b, read(), secs, "s", os.Stdout)
	b.ReportMetric(0, "ns/op")
}
