package jobs

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of one run of a handler, the outcome label of
// hallmark_jobs_total.
const (
	OutcomeCompleted = "completed" // the handler returned nil
	OutcomeSnoozed   = "snoozed"   // it waits its turn; no attempt used
	OutcomeRetried   = "retried"   // CouldNotRun with attempts left
	OutcomeAbandoned = "abandoned" // out of attempts, or the handler broke
	OutcomeStopped   = "stopped"   // the worker stopped, its heartbeat lapsed, or an operator cancelled it
	OutcomeDeferred  = "deferred"  // its backend is unavailable: tried again later, no attempt used
	OutcomeExpired   = "expired"   // its backend stayed unavailable past the subject's deadline
)

// outcomes are every outcome, exported at 0 from the start.
var outcomes = []string{OutcomeCompleted, OutcomeSnoozed, OutcomeRetried, OutcomeAbandoned, OutcomeStopped, OutcomeDeferred, OutcomeExpired}

// Metrics are the job runner's: what each run of a handler came to and
// how long it took. Settings.Metrics takes one; nil records nothing.
type Metrics struct {
	runs     *prometheus.CounterVec
	duration *prometheus.HistogramVec
	rescues  *prometheus.CounterVec
}

// NewMetrics registers the job metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hallmark_jobs_total",
			Help: "Runs of a job handler, by kind and outcome (completed, snoozed, retried, abandoned, stopped, deferred, expired).",
		}, []string{"kind", "outcome"}),
		rescues: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hallmark_jobs_rescued_total",
			Help: "Running jobs this worker returned to the queue because their worker's heartbeat lapsed, by kind.",
		}, []string{"kind"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hallmark_job_duration_seconds",
			Help:    "Time a job handler ran, by kind and outcome.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"kind", "outcome"}),
	}
	for _, c := range []prometheus.Collector{m.runs, m.duration, m.rescues} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering job metrics: %w", err)
		}
	}
	return m, nil
}

// zero exports every kind's outcomes at 0 from the start, so a rate or
// increase over them is defined before the first run.
func (m *Metrics) zero(kinds []string) {
	if m == nil {
		return
	}
	for _, k := range kinds {
		for _, o := range outcomes {
			m.runs.WithLabelValues(k, o)
		}
		m.rescues.WithLabelValues(k)
	}
}

func (m *Metrics) observe(kind, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.runs.WithLabelValues(kind, outcome).Inc()
	m.duration.WithLabelValues(kind, outcome).Observe(d.Seconds())
}

func (m *Metrics) rescued(kind string) {
	if m == nil {
		return
	}
	m.rescues.WithLabelValues(kind).Inc()
}

// Depth is the jobs of one queue, kind and state that are not finished.
type Depth struct {
	Queue, Kind, State string
	Count              int64
	// Deferred counts those deferred at least once: their backend was
	// unavailable (Unavailable).
	Deferred int64
	// Oldest is how long the oldest has waited: since its scheduled_at
	// (available, scheduled, retryable) or its attempt began (running).
	Oldest time.Duration
}

// The unfinished states; River's fetch index leads with state, so the
// count reads only these rows.
const depthStates = `('available','running','retryable','scheduled')`

const depthPostgres = `SELECT queue, kind, state::text, count(*), count(*) FILTER (WHERE metadata ? '` + deferralsKey + `'),
  COALESCE(EXTRACT(EPOCH FROM now() - min(CASE WHEN state = 'running' THEN attempted_at ELSE scheduled_at END)), 0)::float8
  FROM river_job WHERE state IN ` + depthStates + ` GROUP BY queue, kind, state`

const depthSQLite = `SELECT queue, kind, state, count(*), sum(json_type(metadata, '$.` + deferralsKey + `') IS NOT NULL),
  COALESCE((julianday('now') - julianday(min(CASE WHEN state = 'running' THEN attempted_at ELSE scheduled_at END))) * 86400.0, 0)
  FROM river_job WHERE state IN ` + depthStates + ` GROUP BY queue, kind, state`

type rows interface {
	Next() bool
	Scan(...any) error
	Err() error
}

func scanDepths(r rows) ([]Depth, error) {
	var out []Depth
	for r.Next() {
		var d Depth
		var secs float64
		if err := r.Scan(&d.Queue, &d.Kind, &d.State, &d.Count, &d.Deferred, &secs); err != nil {
			return nil, err
		}
		d.Oldest = time.Duration(max(secs, 0) * float64(time.Second))
		out = append(out, d)
	}
	return out, r.Err()
}

func depthOnPostgres(pool *pgxpool.Pool) func(context.Context) ([]Depth, error) {
	return func(ctx context.Context) ([]Depth, error) {
		r, err := pool.Query(ctx, depthPostgres)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		return scanDepths(r)
	}
}

func depthOnSQLite(db *sql.DB) func(context.Context) ([]Depth, error) {
	return func(ctx context.Context) ([]Depth, error) {
		r, err := db.QueryContext(ctx, depthSQLite)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		return scanDepths(r)
	}
}

// Depths reads how many jobs wait in each queue, kind and state.
func Depths(ctx context.Context, q Queue) ([]Depth, error) {
	d, ok := q.(interface {
		depths(context.Context) ([]Depth, error)
	})
	if !ok {
		return nil, fmt.Errorf("reading queue depth: %T is not a river queue", q)
	}
	return d.depths(ctx)
}

func (q *riverQueue[TTx]) depths(ctx context.Context) ([]Depth, error) {
	if q.depth == nil {
		return nil, fmt.Errorf("reading queue depth: not available for this queue")
	}
	out, err := q.depth(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading queue depth from river_job: %w", err)
	}
	return out, nil
}

// DepthCollector exports Depths at scrape time: one grouped read of the
// unfinished jobs, bounded by timeout. A failed read exports
// hallmark_jobs_depth_up 0 and no depth, so an alert on it is not silenced
// by stale numbers.
type DepthCollector struct {
	q        Queue
	timeout  time.Duration
	count    *prometheus.Desc
	oldest   *prometheus.Desc
	deferred *prometheus.Desc
	up       *prometheus.Desc
}

// NewDepthCollector returns the collector of q's depth.
func NewDepthCollector(q Queue, timeout time.Duration) *DepthCollector {
	labels := []string{"queue", "kind", "state"}
	return &DepthCollector{q: q, timeout: timeout,
		count: prometheus.NewDesc("hallmark_jobs_waiting",
			"Unfinished jobs by queue, kind and state (available, running, retryable, scheduled).", labels, nil),
		oldest: prometheus.NewDesc("hallmark_jobs_oldest_seconds",
			"Age of the oldest unfinished job by queue, kind and state: since it was due, or since its attempt began when running.", labels, nil),
		deferred: prometheus.NewDesc("hallmark_jobs_deferred",
			"Unfinished jobs deferred at least once because their backend was unavailable, by queue, kind and state; each waits, with backoff, until the backend returns or its order expires.", labels, nil),
		up: prometheus.NewDesc("hallmark_jobs_depth_up",
			"1 when the last scrape read the job table, 0 when the read failed.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *DepthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.count
	ch <- c.oldest
	ch <- c.deferred
	ch <- c.up
}

// Collect implements prometheus.Collector.
func (c *DepthCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	ds, err := Depths(ctx, c.q)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	for _, d := range ds {
		ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(d.Count), d.Queue, d.Kind, d.State)
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, d.Oldest.Seconds(), d.Queue, d.Kind, d.State)
		ch <- prometheus.MustNewConstMetric(c.deferred, prometheus.GaugeValue, float64(d.Deferred), d.Queue, d.Kind, d.State)
	}
}
