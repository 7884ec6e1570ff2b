package open

import (
	"context"
	"fmt"
	"time"

	"github.com/hallmark-ca/hallmark/store/postgres"
)

// Verdicts is what WatchVerdicts feeds: protocol/verdict.Hub.
type Verdicts interface {
	postgres.Listener
	Poll(ctx context.Context, every time.Duration, settled func(ctx context.Context, ids []string) ([]string, error)) error
}

// SQLitePollEvery is how often a SQLite frontend reads whether the
// subjects its requests wait on have their verdict, while any does
// (docs/performance.md, "Verdict waiting").
const SQLitePollEvery = 5 * time.Millisecond

// settler is the SQLite store's read of which subjects have their verdict
// (sqlstore.Store.Settled).
type settler interface {
	Settled(ctx context.Context, ids []string) ([]string, error)
}

// WatchVerdicts tells v of every verdict recorded on a challenge or an
// order, by any worker, until ctx ends: on PostgreSQL through one
// connection of its own that LISTENs for the verdicts' announcements
// (postgres.Listen); on SQLite, which cannot push, by v's poll of the
// subjects waited on, on the read-only pool, every SQLitePollEvery.
func (db *DB) WatchVerdicts(ctx context.Context, v Verdicts) error {
	if db.pool != nil {
		return postgres.Listen(ctx, db.pool, v)
	}
	st, ok := db.Store.(settler)
	if !ok {
		return fmt.Errorf("watching verdicts: the %s store cannot read them", db.Dialect)
	}
	return v.Poll(ctx, SQLitePollEvery, st.Settled)
}
