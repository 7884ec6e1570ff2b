package jobs

import (
	"database/sql"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// NewPostgresNotifyEvery is NewPostgres with another insert-notification
// limit, for benchmarks that explore it.
func NewPostgresNotifyEvery(pool *pgxpool.Pool, every time.Duration) Queue {
	q := NewPostgres(pool).(*riverQueue[pgx.Tx])
	return newQueue(riverpgxv5.New(pool), q.maxWorkers, every, q.asTx)
}

// RunnerPool is the pool a started PostgreSQL worker runs River on.
var RunnerPool = runnerPool

// NewSQLite's insert-notification limit and commit-check interval.
const (
	NotifyEverySQLite = notifyEverySQLite
	NotifyCheckSQLite = notifyCheckSQLite
)

// NewSQLiteTuned is NewSQLite with another insert-notification limit and
// commit-check interval, for benchmarks that explore them.
func NewSQLiteTuned(db *sql.DB, notifyEvery, checkEvery time.Duration) Queue {
	return newSQLite(db, notifyEvery, checkEvery)
}
