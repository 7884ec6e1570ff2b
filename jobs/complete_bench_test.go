package jobs_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/hallmark-ca/hallmark/jobs"
)

// BenchmarkComplete measures finishing jobs the way the worker's handlers
// do on PostgreSQL: a verdict transaction (update the subject, insert a
// verdict row), for b.N jobs queued beforehand and worked by one worker with
// the default settings. Variants:
//
//	none           nothing more in the transaction; River's batch completer
//	               marks the job completed once the handler returns nil
//	               (what the handlers do)
//	jobcompletetx  river.JobCompleteTx in the verdict's transaction, which
//	               is what the store's verdicts did before
//	update         a bare UPDATE of river_job in the transaction, for
//	               comparison only: it is no River API
//
// It reports jobs/s, the p50 of the completion step alone and of the whole
// verdict transaction, and (with pg_stat_statements) the statements and
// execution time per job; -v lists the statements.
//
//	go test ./jobs -run '^$' -bench Complete -benchtime=2000x -count=1
func BenchmarkComplete(b *testing.B) {
	variants := []struct {
		name     string
		complete func(ctx context.Context, tx pgx.Tx, job jobs.Job[workArgs]) error
	}{
		{"none", func(context.Context, pgx.Tx, jobs.Job[workArgs]) error { return nil }},
		{"jobcompletetx", func(ctx context.Context, tx pgx.Tx, job jobs.Job[workArgs]) error {
			// JobCompleteTx reads only the id and state of the job it is given.
			rj := &river.Job[workArgs]{JobRow: &rivertype.JobRow{ID: job.ID, State: rivertype.JobStateRunning}}
			_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, rj)
			return err
		}},
		{"update", func(ctx context.Context, tx pgx.Tx, job jobs.Job[workArgs]) error {
			_, err := tx.Exec(ctx, `UPDATE river_job SET state = 'completed', finalized_at = now()
WHERE id = $1 AND state = 'running'`, job.ID)
			return err
		}},
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) { benchComplete(b, v.complete) })
	}
}

func benchComplete(b *testing.B, complete func(context.Context, pgx.Tx, jobs.Job[workArgs]) error) {
	e := newEnv(b, "postgres")
	pool := e.db.(pgDB).pool
	ctx := context.Background()
	// The subjects and their jobs, queued before the worker starts.
	for i := 0; i < b.N; i += 100 {
		tx, err := e.db.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for j := i; j < min(i+100, b.N); j++ {
			key := fmt.Sprintf("s%06d", j)
			if err := tx.Exec(ctx, "INSERT INTO subjects (id, state) VALUES (?, 'processing')", key); err != nil {
				b.Fatal(err)
			}
			if _, _, err := e.q.Inserter().InsertTx(ctx, tx.Tx(), workArgs{Key: key}); err != nil {
				b.Fatal(err)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if err := e.db.Exec(ctx, "VACUUM ANALYZE river_job"); err != nil {
		b.Fatal(err)
	}
	stats := newPGStats(b, e.db)
	stats.reset(b)

	var (
		mu              sync.Mutex
		completeT, txT  []time.Duration
		verdicts, fails int
		all             = make(chan struct{})
	)
	reg := &jobs.Registry{}
	if err := jobs.Register(reg, func(ctx context.Context, job jobs.Job[workArgs]) error {
		began := time.Now()
		tx, err := pool.Begin(ctx)
		if err != nil {
			return jobs.CouldNotRun(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, "UPDATE subjects SET state = 'valid' WHERE id = $1 AND state = 'processing'", job.Args.Key); err != nil {
			return jobs.CouldNotRun(err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO verdicts (id) VALUES ($1)", job.Args.Key); err != nil {
			return jobs.CouldNotRun(err)
		}
		c := time.Now()
		err = complete(ctx, tx, job)
		cd := time.Since(c)
		if err == nil {
			err = tx.Commit(ctx)
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			fails++
			return jobs.CouldNotRun(err)
		}
		completeT = append(completeT, cd)
		txT = append(txT, time.Since(began))
		if verdicts++; verdicts == b.N {
			close(all)
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	s := jobs.Settings{WorkerID: "bench-worker", Queues: []string{testQueue}, Subjects: subjects{e.db, e.q}}
	b.ResetTimer()
	began := time.Now()
	start(b, e.q, reg, s)
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("only %d of %d verdicts", verdicts, b.N)
	}
	// Finished means completed in river_job, whoever wrote it.
	for count(b, e.db, "SELECT /* bench */ count(*) FROM river_job WHERE state = 'completed'") < int64(b.N) {
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(began)
	b.StopTimer()
	if fails > 0 {
		b.Errorf("%d verdict transactions failed", fails)
	}
	slices.Sort(completeT)
	slices.Sort(txT)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(ms(completeT[len(completeT)/2]), "complete-p50-ms")
	b.ReportMetric(ms(txT[len(txT)/2]), "tx-p50-ms")
	b.ReportMetric(0, "ns/op")
	report(b, stats.read(b), float64(b.N), "job", os.Stdout)
}
