package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// createDatabase creates a fresh PostgreSQL database on the admin URL's
// server and returns its URL and a function that drops it.
func createDatabase(ctx context.Context, admin string) (string, func(), error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", nil, fmt.Errorf("connecting to PostgreSQL at %s (set --postgres): %w", maskedURL(admin), err)
	}
	defer conn.Close(ctx)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "hallmark_load_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("creating database %s: %w", name, err)
	}
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	}
	u := mustURL(admin)
	u.Path = "/" + name
	return u.String(), drop, nil
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

// jobLatency reads, from River's own table, how long each kind of job
// inserted since since waited from its insert to its start and how long it
// ran (p50 and p99 in ms). River stamps created_at with the inserting
// transaction's start, so the wait includes the rest of that transaction
// and its commit.
func jobLatency(ctx context.Context, dbURL string, since time.Time) (string, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT kind, count(*),
  percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM attempted_at - created_at)) * 1000,
  percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM attempted_at - created_at)) * 1000,
  percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finalized_at - attempted_at)) * 1000,
  percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM finalized_at - attempted_at)) * 1000
FROM river_job WHERE attempted_at IS NOT NULL AND created_at >= $1 GROUP BY kind ORDER BY kind`, since)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var kind string
		var n int64
		var w50, w99, r50, r99 *float64
		if err := rows.Scan(&kind, &n, &w50, &w99, &r50, &r99); err != nil {
			return "", err
		}
		f := func(p *float64) string {
			if p == nil {
				return "     -"
			}
			return fmt.Sprintf("%6.1f", *p)
		}
		fmt.Fprintf(&b, "  job %-20s n=%-5d insert→start p50 %s p99 %s ms; run p50 %s p99 %s ms\n", kind, n, f(w50), f(w99), f(r50), f(r99))
	}
	return b.String(), rows.Err()
}

// pgSettings is one line naming the PostgreSQL server at admin and the
// settings a benchmark's figures depend on: whether commits wait for the
// disk, whether dead rows are cleaned up as the run goes, and the cache;
// and whether autovacuum is off.
func pgSettings(ctx context.Context, admin string) (line string, autovacuumOff bool, err error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", false, fmt.Errorf("reading PostgreSQL's settings: %w", err)
	}
	defer conn.Close(ctx)
	var version, autovacuum, syncCommit, fsync, buffers string
	err = conn.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('autovacuum'),
  current_setting('synchronous_commit'), current_setting('fsync'), current_setting('shared_buffers')`).Scan(&version, &autovacuum, &syncCommit, &fsync, &buffers)
	if err != nil {
		return "", false, fmt.Errorf("reading PostgreSQL's settings: %w", err)
	}
	line = fmt.Sprintf("PostgreSQL %s: autovacuum %s, synchronous_commit %s, fsync %s, shared_buffers %s", version, autovacuum, syncCommit, fsync, buffers)
	return line, autovacuum == "off", nil
}

// maskedURL is admin with its password masked, for messages.
func maskedURL(admin string) string {
	u, err := url.Parse(admin)
	if err != nil {
		return "the --postgres URL"
	}
	return u.Redacted()
}
