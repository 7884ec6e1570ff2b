package jobs

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/origin"
)

// The defaults Settings falls back to. FetchCooldown is set explicitly
// because River's own 100 ms caps throughput near 1,000 jobs/s. Measured by
// BenchmarkQueue/postgres/tx100 (20,000 jobs, 2 cores shared): 50 workers
// ~3,700 jobs/s, 200 workers ~7,400-8,300, 500 workers ~8,500; a 2 ms
// cooldown beat 5 ms by ~10%.
//
// Insert notifications start jobs (p50 ~1-3 ms from commit on both
// dialects); the poll only catches a job whose notification the inserting
// client skipped (one within 1 ms of the previous for the same queue on
// PostgreSQL, 2 ms on SQLite) when no later insert's notification comes
// either. Each queue polls, so the interval is most of what an idle worker
// costs: 250 ms (BenchmarkIdle, four queues: on PostgreSQL 73 statements/s
// at 50 ms, 16 at 250 ms; on SQLite, where each poll is an UPDATE costing
// ~1 ms of CPU, 90-105 ms of CPU per second at 50 ms, ~40 at 250 ms) with
// no change to BenchmarkQueue's latencies.
const (
	DefaultFetchCooldown     = 2 * time.Millisecond
	DefaultFetchPollInterval = 250 * time.Millisecond
	DefaultJobTimeout        = 30 * time.Second
	DefaultRescueAfter       = 60 * time.Second
	DefaultRetryBase         = time.Second
	DefaultRetryMax          = 5 * time.Minute
	// DefaultMaxAttempts bounds CouldNotRun retries (and rescues of jobs
	// whose worker died); after the last retry the subject is abandoned, and
	// one the rescuer discards is left to Recover.
	DefaultMaxAttempts = 10

	defaultMaxWorkersPostgres = 200
	defaultMaxWorkersSQLite   = 4

	// On SQLite a notification is a row in an outbox table that workers
	// read (sqliteListener), so the inserting client limits them to one per
	// queue per notifyEverySQLite, and a worker checks for other processes'
	// commits every notifyCheckSQLite. BenchmarkQueue/sqlite/paced, p50
	// insert→start: 16 ms with riversqlite's own 50 ms outbox poll and a
	// 20 ms limit; 11 ms checking every 5 ms with the 20 ms limit; 2-3 ms
	// with a 1, 2 or 5 ms limit (4 ms checking every 10 ms). The checks
	// cost an idle worker CPU (BenchmarkIdle/sqlite: ~40 ms per second
	// without them, 60-70 every 5 ms, ~57 every 10 ms) and a loaded one a
	// little throughput (BenchmarkQueue/sqlite/tx1 3-6% lower).
	//
	// Where the WAL file can be watched (Linux; jobs/sqlite_walwatch.go) a
	// commit wakes the check at once and the timed check runs only every
	// 50 ms: paced p50 3.0-3.2 -> 1.4-1.6 ms, and an idle worker 72 -> 50
	// ms CPU per second, 223 -> 75 statements (BenchmarkIdle/sqlite).
	// notifyCheckSQLite is then only the fallback where it cannot.
	notifyEverySQLite = 2 * time.Millisecond
	notifyCheckSQLite = 5 * time.Millisecond
)

// Settings tunes the River client. Zero values take the defaults above.
type Settings struct {
	// WorkerID names this worker in every attempt it makes (River's
	// attempted_by). Default: hostname-pid-starttime, unique per start.
	WorkerID          string
	MaxWorkers        int                  // concurrent jobs per queue; default 200 (PostgreSQL), 4 (SQLite)
	QueueMaxWorkers   map[string]int       // a queue's own MaxWorkers, where it differs
	Queues            []string             // queues to work; default QueueValidate, QueueMaintenance
	FetchCooldown     time.Duration        // default 2ms
	FetchPollInterval time.Duration        // default 250ms
	JobTimeout        time.Duration        // default 30s; must be shorter than RescueAfter
	RescueAfter       time.Duration        // default 60s: a job running longer belongs to a dead worker
	Periodic          []*river.PeriodicJob // inserted by River's elected leader alone
	Scheduled         []Scheduled          // inserted by this worker itself

	// RetryBase and RetryMax shape the backoff of CouldNotRun retries:
	// attempt n waits about RetryBase·2^(n-1), jittered, at most RetryMax.
	RetryBase time.Duration // default 1s
	RetryMax  time.Duration // default 5m
	// DeferMax caps the backoff of Unavailable jobs, which starts at
	// RetryBase: the longest a deferred job waits after its backend is back.
	DeferMax time.Duration // default 1m

	// Liveness, when set, keeps this worker's heartbeat on the database's
	// clock and returns the running jobs of workers whose heartbeat lapsed
	// for Heartbeat (a dead or stalled process) to the queue at once
	// (liveness.go); River's rescuer, after RescueAfter, remains for
	// workers with no heartbeat.
	Liveness  Liveness
	Heartbeat time.Duration // default 5s; renewed every fifth of it

	// Subjects is where broken handlers abandon their subject. Required
	// when a registered kind's args implement SubjectArgs.
	Subjects Subjects
	// Logger receives River's logs and abandon reports. Default: warnings
	// and errors to stderr.
	Logger *slog.Logger
	// Metrics counts and times each run of a handler (NewMetrics); nil
	// records nothing.
	Metrics *Metrics
}

// Scheduled is a job this worker inserts itself, once at start and then
// every Every. River's periodic jobs are inserted by its elected leader
// alone, which suits work any worker can do (housekeeping) but not work
// only some workers can: the CRL of an issuer that the leader does not
// mount would never be signed on time. Every worker that can do the work
// inserts it, so the handler must make the extra copies cheap.
type Scheduled struct {
	Every time.Duration
	Args  river.JobArgs
}

func (s Settings) withDefaults(maxWorkers int) Settings {
	if s.WorkerID == "" {
		host, _ := os.Hostname()
		s.WorkerID = fmt.Sprintf("%s-%d-%d", host, os.Getpid(), time.Now().UnixMilli())
	}
	if s.MaxWorkers <= 0 {
		s.MaxWorkers = maxWorkers
	}
	if len(s.Queues) == 0 {
		s.Queues = []string{QueueValidate, QueueMaintenance}
	}
	if s.FetchCooldown <= 0 {
		s.FetchCooldown = DefaultFetchCooldown
	}
	if s.FetchPollInterval <= 0 {
		s.FetchPollInterval = DefaultFetchPollInterval
	}
	if s.JobTimeout == 0 {
		s.JobTimeout = DefaultJobTimeout
	}
	if s.RescueAfter <= 0 {
		s.RescueAfter = max(DefaultRescueAfter, 2*s.JobTimeout)
	}
	if s.RetryBase <= 0 {
		s.RetryBase = DefaultRetryBase
	}
	if s.RetryMax <= 0 {
		s.RetryMax = DefaultRetryMax
	}
	if s.DeferMax <= 0 {
		s.DeferMax = DefaultDeferMax
	}
	if s.Heartbeat <= 0 {
		s.Heartbeat = DefaultHeartbeat
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return s
}

// Subjects is what abandon and recover need from the store.
type Subjects interface {
	Stranded(ctx context.Context, olderThan time.Time) ([]Subject, error)
	Requeue(ctx context.Context, s Subject) error
	// Abandon fails a processing subject; false when it was not
	// processing (it has its verdict) and nothing changed.
	Abandon(ctx context.Context, s Subject, p acme.Problem) (bool, error)
}

// Queue is River wired to one database, for either dialect.
type Queue interface {
	// Inserter inserts jobs inside a store transaction of the same dialect.
	Inserter() Inserter
	// Migrate applies River's own migrations.
	Migrate(ctx context.Context) error
	// Start builds a working River client for the registry's handlers and
	// starts it; Stop (via the returned Runner) stops fetching and waits
	// for running jobs up to ctx's deadline.
	Start(ctx context.Context, reg *Registry, s Settings) (Runner, error)
}

// Runner is a started worker client.
type Runner interface {
	Stop(ctx context.Context) error
	// Schedule works queue too, from now on, and inserts j now and every
	// j.Every as Settings.Scheduled does: an issuer made while the worker
	// runs gets its CRL queue without a restart.
	Schedule(queue string, j Scheduled) error
	// Follow works the queues and inserts the scheduled jobs of s that it
	// does not yet, from now on (a reload that adds a profile); the
	// others, and every other setting, stay as Start fixed them.
	Follow(s Settings) error
}

// NewPostgres returns a Queue on a pgx pool (River's riverpgxv5 driver).
// Jobs are inserted on pool, in the store's transactions; a started worker
// runs on a pool of its own (runnerPool).
func NewPostgres(pool *pgxpool.Pool) Queue {
	q := newQueue(riverpgxv5.New(pool), defaultMaxWorkersPostgres, river.FetchCooldownMin, func(tx Tx) (pgx.Tx, bool) {
		t, ok := tx.(pgx.Tx)
		return t, ok
	})
	q.runOn = func(ctx context.Context) (riverdriver.Driver[pgx.Tx], func(), error) {
		run, err := runnerPool(ctx, pool)
		if err != nil {
			return nil, nil, err
		}
		return riverpgxv5.New(run), run.Close, nil
	}
	q.depth = depthOnPostgres(pool)
	return q
}

const runnerConns = 6

// runnerPool is a pool like pool whose sessions commit without waiting for
// the WAL flush (synchronous_commit=off), for River's own work in a worker:
// fetching jobs, completing them, rescuing and cleaning up. At one job at a
// time the fetch's flush was on the path from a claim to its job's start.
//
// Nothing is lost by it. A fetch or completion that a crash forgets puts
// its job back (available, or running until River's rescuer frees it), and
// the job runs again; the handlers are idempotent (a verdict and an
// issuance are compare-and-swaps). What a job does that must survive, its
// verdict or certificate, the store commits on its own pool, synchronously,
// and PostgreSQL writes WAL in order: that commit's flush carries every
// earlier asynchronous commit with it, so River's bookkeeping is lost only
// together with what came after it. Inserting jobs stays on the store's
// pool, inside the store's synchronous transactions.
//
// River's bookkeeping is a few statements at a time (a fetch per queue, a
// batch of completions, its notification listener), so the pool is small:
// runnerConns at most.
func runnerPool(ctx context.Context, pool *pgxpool.Pool) (*pgxpool.Pool, error) {
	cfg := pool.Config()
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	cfg.MaxConns = min(cfg.MaxConns, runnerConns)
	cfg.MinConns = min(cfg.MinConns, cfg.MaxConns)
	run, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening the job runner's PostgreSQL pool: %w", err)
	}
	return run, nil
}

// NewSQLite returns a Queue on a database/sql handle opened with
// modernc.org/sqlite (River's riversqlite driver). The handle must have one
// open connection (SetMaxOpenConns(1)) and a busy_timeout; WAL and
// _txlock=immediate let several processes share the file.
//
// With one connection, code holding a transaction on the handle must do all
// its database work through it: a second query on the handle while that
// transaction is open waits for a connection that never frees.
func NewSQLite(db *sql.DB) Queue {
	return newSQLite(db, notifyEverySQLite, notifyCheckSQLite)
}

// NewSQLiteRunner is NewSQLite whose started workers run River's own work
// (fetching, completing, rescuing, the outbox reads) on a handle of its
// own that runner opens, one whose commits need not be synced: a SQLite
// worker's counterpart of runnerPool (store/sqlite.OpenJobRunner says why
// nothing is lost). Jobs are still inserted on db, in the store's
// transactions.
func NewSQLiteRunner(db *sql.DB, runner func() (*sql.DB, error)) Queue {
	q := newSQLite(db, notifyEverySQLite, notifyCheckSQLite)
	q.runOn = func(context.Context) (riverdriver.Driver[*sql.Tx], func(), error) {
		run, err := runner()
		if err != nil {
			return nil, nil, fmt.Errorf("opening the job runner's SQLite handle: %w", err)
		}
		return sqliteDriver{Driver: riversqlite.New(run), db: run, checkEvery: notifyCheckSQLite}, func() { _ = run.Close() }, nil
	}
	return q
}

// newSQLite is NewSQLite with the inserting client's notification limit
// and how often a worker checks for other processes' commits.
func newSQLite(db *sql.DB, notifyEvery, checkEvery time.Duration) *riverQueue[*sql.Tx] {
	d := sqliteDriver{Driver: riversqlite.New(db), db: db, checkEvery: checkEvery}
	q := newQueue(d, defaultMaxWorkersSQLite, notifyEvery, func(tx Tx) (*sql.Tx, bool) {
		t, ok := tx.(*sql.Tx)
		return t, ok
	})
	q.depth = depthOnSQLite(db)
	return q
}

// riverQueue is Queue for one driver; TTx is pgx.Tx or *sql.Tx.
type riverQueue[TTx any] struct {
	driver     riverdriver.Driver[TTx]
	maxWorkers int // the dialect's default Settings.MaxWorkers
	asTx       func(Tx) (TTx, bool)

	// client is insert-only (no Workers, no Queues): it is never started,
	// it inserts, lists, retries and cancels.
	client    *river.Client[TTx]
	clientErr error

	// runOn, if set, opens the driver a started worker runs on instead of
	// driver, and how to close it once the worker stops.
	runOn func(context.Context) (riverdriver.Driver[TTx], func(), error)

	// depth reads the unfinished jobs for the metrics (jobs/metrics.go).
	depth func(context.Context) ([]Depth, error)
}

func newQueue[TTx any](driver riverdriver.Driver[TTx], maxWorkers int, notifyEvery time.Duration, asTx func(Tx) (TTx, bool)) *riverQueue[TTx] {
	q := &riverQueue[TTx]{driver: driver, maxWorkers: maxWorkers, asTx: asTx}
	q.client, q.clientErr = river.NewClient(driver, &river.Config{
		// An inserting client notifies workers of new jobs at most once per
		// FetchCooldown per queue; River's 100 ms default would leave a job
		// inserted just after a notification waiting for the workers' poll.
		FetchCooldown: notifyEvery,
		MaxAttempts:   DefaultMaxAttempts,
		// The workers live in another process: an insert-only client has no
		// Workers to check kinds against, which is what we want.
		SkipUnknownJobCheck: true,
	})
	if q.clientErr != nil {
		q.clientErr = fmt.Errorf("building the insert-only river client: %w", q.clientErr)
	}
	return q
}

func (q *riverQueue[TTx]) Inserter() Inserter { return inserter[TTx]{q} }

type inserter[TTx any] struct{ q *riverQueue[TTx] }

func (i inserter[TTx]) InsertTx(ctx context.Context, tx Tx, args river.JobArgs) (int64, bool, error) {
	if i.q.clientErr != nil {
		return 0, false, i.q.clientErr
	}
	t, ok := i.q.asTx(tx)
	if !ok {
		return 0, false, fmt.Errorf("inserting a %s job: transaction is a %T, not one of this queue's dialect", args.Kind(), tx)
	}
	res, err := i.q.client.InsertTx(ctx, t, args, insertOpts(ctx))
	if err != nil {
		return 0, false, fmt.Errorf("inserting a %s job: %w", args.Kind(), err)
	}
	// On a skip River returns the outstanding job it kept, on both drivers.
	return res.Job.ID, !res.UniqueSkippedAsDuplicate, nil
}

// BatchInserter inserts many jobs in one store transaction: one commit
// instead of one per job, which is what lifts throughput past the
// database's commit rate. Queue.Inserter() values implement it.
type BatchInserter interface {
	InsertManyTx(ctx context.Context, tx Tx, args []river.JobArgs) (inserted int, err error)
}

// InsertManyTx inserts args in tx; inserted counts the jobs uniqueness did
// not skip.
func (i inserter[TTx]) InsertManyTx(ctx context.Context, tx Tx, args []river.JobArgs) (int, error) {
	if i.q.clientErr != nil {
		return 0, i.q.clientErr
	}
	if len(args) == 0 {
		return 0, nil
	}
	t, ok := i.q.asTx(tx)
	if !ok {
		return 0, fmt.Errorf("inserting %d jobs: transaction is a %T, not one of this queue's dialect", len(args), tx)
	}
	params := make([]river.InsertManyParams, len(args))
	for j, a := range args {
		params[j] = river.InsertManyParams{Args: a, InsertOpts: insertOpts(ctx)}
	}
	res, err := i.q.client.InsertManyTx(ctx, t, params)
	if err != nil {
		return 0, fmt.Errorf("inserting %d jobs: %w", len(args), err)
	}
	n := 0
	for _, r := range res {
		if !r.UniqueSkippedAsDuplicate {
			n++
		}
	}
	return n, nil
}

func (q *riverQueue[TTx]) Migrate(ctx context.Context) error {
	m, err := rivermigrate.New(q.driver, nil)
	if err != nil {
		return fmt.Errorf("preparing river migrations: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("applying river migrations: %w", err)
	}
	return nil
}

func (q *riverQueue[TTx]) Start(ctx context.Context, reg *Registry, s Settings) (Runner, error) {
	s = s.withDefaults(q.maxWorkers)
	if s.RescueAfter <= s.JobTimeout {
		return nil, fmt.Errorf("starting the job runner: RescueAfter (%s) must be longer than JobTimeout (%s), or running jobs are rescued while alive", s.RescueAfter, s.JobTimeout)
	}
	var k *keeper
	if s.Liveness != nil {
		// Registered before the first fetch, so every job this run takes
		// is attempted after the run's start.
		k = newKeeper(s.Liveness, s.WorkerID, s.Heartbeat, s.Logger, s.Metrics)
		if err := k.register(ctx); err != nil {
			return nil, fmt.Errorf("registering the heartbeat of worker %s: %w", s.WorkerID, err)
		}
	}
	workers, err := reg.workers(&runEnv{subjects: s.Subjects, logger: origin.Logger(s.Logger), workerID: s.WorkerID, metrics: s.Metrics,
		keeper: k, deferBase: s.RetryBase, deferMax: s.DeferMax})
	if err != nil {
		return nil, err
	}
	s.Metrics.zero(reg.Kinds())
	queues := make(map[string]river.QueueConfig, len(s.Queues))
	for _, name := range s.Queues {
		queues[name] = s.queueConfig(name)
	}
	driver, closeDriver := q.driver, func() {}
	if q.runOn != nil {
		if driver, closeDriver, err = q.runOn(ctx); err != nil {
			return nil, err
		}
	}
	client, err := river.NewClient(driver, &river.Config{
		ID:                   s.WorkerID,
		Queues:               queues,
		Workers:              workers,
		FetchCooldown:        s.FetchCooldown,
		FetchPollInterval:    s.FetchPollInterval,
		JobTimeout:           s.JobTimeout,
		RescueStuckJobsAfter: s.RescueAfter,
		MaxAttempts:          DefaultMaxAttempts,
		RetryPolicy:          backoff{base: s.RetryBase, max: s.RetryMax},
		PeriodicJobs:         s.Periodic,
		Logger:               s.Logger,
	})
	if err != nil {
		closeDriver()
		return nil, fmt.Errorf("building the river client for worker %s: %w", s.WorkerID, err)
	}
	if err := client.Start(ctx); err != nil {
		closeDriver()
		return nil, fmt.Errorf("starting the river client for worker %s: %w", s.WorkerID, err)
	}
	// The heartbeat outlives River's stop: jobs finishing meanwhile are
	// still this worker's.
	kctx, stopKeeper := context.WithCancel(context.WithoutCancel(ctx))
	var kwg sync.WaitGroup
	if k != nil {
		kwg.Go(func() { k.run(kctx) })
	}
	return newRunner(ctx, client, closeDriver, s, func() { stopKeeper(); kwg.Wait() }), nil
}
