package jobs_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/hallmark-ca/hallmark/jobs"
)

// benchArgs is a job with no uniqueness: the benchmark measures the queue.
type benchArgs struct {
	Run int `json:"run"`
	Seq int `json:"seq"`
}

func (benchArgs) Kind() string                 { return "bench" }
func (benchArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: testQueue} }

// benchRun is one b.N iteration's bookkeeping: when each job was inserted
// and when its handler started.
type benchRun struct {
	inserted, committed, started []time.Time
	ran                          atomic.Int64
	all                          chan struct{}
}

// BenchmarkQueue measures a frontend process inserting jobs and a separate
// worker process working them with a trivial handler that River completes:
// jobs/s from the first insert to the last completion, and insert→start
// latency (p50, p99, max). tx1 inserts one job per transaction from several
// goroutines, as requests do; tx100 inserts 100 per transaction
// (InsertManyTx), which is what lifts throughput past the commit rate;
// paced offers one job per transaction every 5 ms, for latency without a
// backlog (its jobs/s is the offered rate, not capacity); pairs offers two
// at once from two goroutines every 10 ms, as a client answering two
// challenges does: the inserting client skips the second notification when
// it comes within 1 ms (2 ms on SQLite), and that job waits for the next pair's (p99) or,
// with no next pair, the poll (max). With pg_stat_statements it also
// reports the statements and their execution time per job (-v lists them).
//
//	go test ./jobs -run '^$' -bench Queue -benchtime=20000x
func BenchmarkQueue(b *testing.B) {
	for _, d := range dialects {
		b.Run(d, func(b *testing.B) {
			inserters := 8
			if d == "sqlite" {
				inserters = 1 // one connection: more goroutines only queue for it
			}
			b.Run("tx1", func(b *testing.B) { benchQueue(b, d, inserters, 1, 0) })
			b.Run("tx100", func(b *testing.B) { benchQueue(b, d, min(inserters, 2), 100, 0) })
			// paced: 1 job per tx every 5 ms, well under capacity, so the
			// latency is the queue's own rather than a backlog's.
			b.Run("paced", func(b *testing.B) { benchQueue(b, d, 1, 1, 5*time.Millisecond) })
			// pairs: two jobs at once every 10 ms, one per goroutine.
			b.Run("pairs", func(b *testing.B) { benchQueue(b, d, 2, 1, 10*time.Millisecond) })
		})
	}
}

func benchQueue(b *testing.B, dialect string, inserters, perTx int, pace time.Duration) {
	e := newEnv(b, dialect)
	workerDB, workerQ := e.open(b)
	var (
		mu   sync.Mutex
		runs = map[int]*benchRun{}
	)
	reg := &jobs.Registry{}
	if err := jobs.Register(reg, func(ctx context.Context, job jobs.Job[benchArgs]) error {
		mu.Lock()
		r := runs[job.Args.Run]
		mu.Unlock()
		r.started[job.Args.Seq] = time.Now()
		if r.ran.Add(1) == int64(len(r.started)) {
			close(r.all)
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	s := jobs.Settings{WorkerID: "bench-worker", Queues: []string{testQueue}, Subjects: subjects{workerDB, workerQ}}
	// Tuning knobs for exploring; the defaults are what Start uses.
	if v, err := strconv.Atoi(os.Getenv("HALLMARK_BENCH_MAX_WORKERS")); err == nil {
		s.MaxWorkers = v
	}
	if v, err := time.ParseDuration(os.Getenv("HALLMARK_BENCH_FETCH_COOLDOWN")); err == nil {
		s.FetchCooldown = v
	}
	if v, err := time.ParseDuration(os.Getenv("HALLMARK_BENCH_FETCH_POLL")); err == nil {
		s.FetchPollInterval = v
	}
	// The inserting client's limit on insert notifications and, on SQLite,
	// how often the worker checks for the inserting process's commits.
	inserts := e.q
	notifyEvery, notifyErr := time.ParseDuration(os.Getenv("HALLMARK_BENCH_NOTIFY_EVERY"))
	notifyCheck, checkErr := time.ParseDuration(os.Getenv("HALLMARK_BENCH_NOTIFY_CHECK"))
	switch {
	case dialect == "postgres" && notifyErr == nil:
		inserts = jobs.NewPostgresNotifyEvery(e.db.(pgDB).pool, notifyEvery)
	case dialect == "sqlite" && (notifyErr == nil || checkErr == nil):
		if notifyErr != nil {
			notifyEvery = jobs.NotifyEverySQLite
		}
		if checkErr != nil {
			notifyCheck = jobs.NotifyCheckSQLite
		}
		inserts = jobs.NewSQLiteTuned(e.db.(liteDB).db, notifyEvery, notifyCheck)
		workerQ = jobs.NewSQLiteTuned(workerDB.(liteDB).db, notifyEvery, notifyCheck)
	}
	start(b, workerQ, reg, s)
	ctx := context.Background()
	var completedBefore int64
	run := 0
	stats := newPGStats(b, e.db)
	stats.reset(b)

	b.ResetTimer()
	run++
	r := &benchRun{inserted: make([]time.Time, b.N), committed: make([]time.Time, b.N), started: make([]time.Time, b.N), all: make(chan struct{})}
	mu.Lock()
	runs[run] = r
	mu.Unlock()
	began := time.Now()
	var wg sync.WaitGroup
	var insertErr atomic.Value
	batches := (b.N + perTx - 1) / perTx
	for g := range inserters {
		wg.Go(func() {
			for batch := g; batch < batches; batch += inserters {
				args := make([]river.JobArgs, 0, perTx)
				now := time.Now()
				for seq := batch * perTx; seq < min((batch+1)*perTx, b.N); seq++ {
					r.inserted[seq] = now
					args = append(args, benchArgs{Run: run, Seq: seq})
				}
				tx, err := e.db.Begin(ctx)
				if err == nil {
					if len(args) == 1 {
						_, _, err = inserts.Inserter().InsertTx(ctx, tx.Tx(), args[0])
					} else {
						_, err = inserts.Inserter().(jobs.BatchInserter).InsertManyTx(ctx, tx.Tx(), args)
					}
					if err == nil {
						err = tx.Commit(ctx)
						committed := time.Now()
						for seq := batch * perTx; seq < min((batch+1)*perTx, b.N); seq++ {
							r.committed[seq] = committed
						}
					} else {
						_ = tx.Rollback(ctx)
					}
				}
				if err != nil {
					insertErr.Store(err)
					return
				}
				if pace > 0 {
					time.Sleep(pace)
				}
			}
		})
	}
	wg.Wait()
	insertsDone := time.Since(began)
	if err, _ := insertErr.Load().(error); err != nil {
		b.Fatalf("inserting: %v", err)
	}
	select {
	case <-r.all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("only %d of %d jobs started", r.ran.Load(), b.N)
	}
	for {
		n := count(b, e.db, "SELECT /* bench */ count(*) FROM river_job WHERE kind = 'bench' AND state = 'completed'")
		if n-completedBefore >= int64(b.N) {
			completedBefore = n
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	elapsed := time.Since(began)
	b.StopTimer()

	// Latency from the commit that made the job visible to its start (the
	// worker can see it a moment before Commit returns: clamped at 0), and
	// from the insert transaction's begin (adds the commit's own cost).
	lat, fromBegin := make([]time.Duration, b.N), make([]time.Duration, b.N)
	for i := range lat {
		lat[i] = max(r.started[i].Sub(r.committed[i]), 0)
		fromBegin[i] = r.started[i].Sub(r.inserted[i])
	}
	slices.Sort(lat)
	slices.Sort(fromBegin)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms") // a job no notification reached waits for the poll
	b.ReportMetric(ms(fromBegin[len(fromBegin)/2]), "p50-from-begin-ms")
	b.ReportMetric(0, "ns/op")
	report(b, stats.read(b), float64(b.N), "job", os.Stdout)
	if testing.Verbose() {
		fmt.Printf("%s/tx%d: %d jobs in %s (inserts took %s)\n", dialect, perTx, b.N, elapsed, insertsDone)
	}
}
