package jobs

// This file fixes the API the store, the worker and the CLI build against.
// Bodies marked TODO are filled in by the jobs implementation work.

import (
	"context"
	"database/sql"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// Settings tunes the River client. Zero values take the defaults below, which
// are the measured ones from the design (FetchCooldown and FetchPollInterval
// set explicitly: River's defaults cap throughput near 1,000 jobs/s).
type Settings struct {
	WorkerID          string
	MaxWorkers        int           // concurrent jobs per queue; default 50 (PostgreSQL), 4 (SQLite)
	Queues            []string      // queues to work; default QueueValidate, QueueMaintenance
	FetchCooldown     time.Duration // default 5ms
	FetchPollInterval time.Duration // default 50ms
	JobTimeout        time.Duration // default 30s; must be shorter than RescueAfter
	RescueAfter       time.Duration // default 60s: a job running longer belongs to a dead worker
	Periodic          []*river.PeriodicJob
}

// Subjects is what abandon and recover need from the store.
type Subjects interface {
	Stranded(ctx context.Context, olderThan time.Time) ([]Subject, error)
	Requeue(ctx context.Context, s Subject) error
	Abandon(ctx context.Context, s Subject, p acme.Problem) error
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
}

// NewPostgres returns a Queue on a pgx pool (River's riverpgxv5 driver).
func NewPostgres(pool *pgxpool.Pool) Queue { panic("TODO") }

// NewSQLite returns a Queue on a database/sql handle opened with
// modernc.org/sqlite (River's riversqlite driver). The handle must have one
// open connection and a busy_timeout.
func NewSQLite(db *sql.DB) Queue { panic("TODO") }

// Registry holds the one handler per kind.
type Registry struct{}
