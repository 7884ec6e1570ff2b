package jobs

import (
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// NewPostgresNotifyEvery is NewPostgres with another insert-notification
// limit, for benchmarks that explore it.
func NewPostgresNotifyEvery(pool *pgxpool.Pool, every time.Duration) Queue {
	q := NewPostgres(pool).(*riverQueue[pgx.Tx])
	return newQueue(riverpgxv5.New(pool), q.maxWorkers, q.pollEvery, every, q.asTx)
}
