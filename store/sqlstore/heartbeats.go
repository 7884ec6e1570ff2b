package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/store"
)

// Beat registers worker's heartbeat (since zero: a new run of the id,
// whose earlier run's jobs RescueLapsed then returns) or renews it until
// the database's now+bound (jobs.Liveness). A heartbeat past its expiry
// whose jobs no worker took is renewed and reported Revived (the database
// was out of reach, or the process stalled, and nobody noticed); one whose
// row a rescue deleted, or another run took, is Lapsed and changes nothing.
// The row lock orders a renewal against RescueLapsed's delete.
func (s *Store) Beat(ctx context.Context, worker string, since time.Time, bound time.Duration) (jobs.Beat, error) {
	var b jobs.Beat
	err := s.inTx(ctx, func(t *txn) error {
		if since.IsZero() {
			err := t.queryRow(ctx, `INSERT INTO worker_heartbeats (worker_id, started_at, expires_at) VALUES ($1, {now}, {now+$2})
ON CONFLICT (worker_id) DO UPDATE SET started_at = excluded.started_at, expires_at = excluded.expires_at
RETURNING started_at`, worker, bound.Microseconds()).Scan(ts(&b.Since))
			b.Now = b.Since
			return err
		}
		var expired bool
		err := t.queryRow(ctx, `SELECT expires_at <= {now} FROM worker_heartbeats WHERE worker_id = $1 AND started_at = $2 {forupdate}`,
			worker, s.d.T(since)).Scan(&expired)
		if err == nil {
			b.Since, b.Revived = since, expired
			return t.queryRow(ctx, `UPDATE worker_heartbeats SET expires_at = {now+$3} WHERE worker_id = $1 AND started_at = $2 RETURNING {now}`,
				worker, s.d.T(since), bound.Microseconds()).Scan(ts(&b.Now))
		}
		if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		b.Lapsed = true
		// A live run begun by someone else: another process has this id.
		var n int64
		if err := t.queryRow(ctx, `SELECT count(*) FROM worker_heartbeats WHERE worker_id = $1 AND started_at <> $2 AND expires_at > {now}`,
			worker, s.d.T(since)).Scan(&n); err != nil {
			return err
		}
		b.Taken = n > 0
		return nil
	})
	if err != nil {
		return jobs.Beat{}, fmt.Errorf("renewing the heartbeat of worker %s: %w", worker, err)
	}
	return b, nil
}

// rescueMessage is the attempt log's line for a rescued job ($1: the
// rescuing worker).
const rescueMessage = `'worker ' || %[1]s || ' stopped renewing its heartbeat (or restarted) while running this attempt; returned to the queue by worker ' || $1`

// dropLapsedPostgres and dropLapsedSQLite delete the heartbeats that
// lapsed while their worker ran jobs, returning the workers: a deleted row
// is what tells a worker still alive that its jobs were taken (Beat). A
// renewal holding the row first leaves it live, and it is not deleted.
const (
	dropLapsedPostgres = `DELETE FROM worker_heartbeats h WHERE h.expires_at <= now()
  AND EXISTS (SELECT 1 FROM river_job j WHERE j.state = 'running' AND j.attempted_by[array_length(j.attempted_by, 1)] = h.worker_id)
RETURNING h.worker_id`
	dropLapsedSQLite = `DELETE FROM worker_heartbeats WHERE expires_at <= {now}
  AND EXISTS (SELECT 1 FROM river_job j WHERE j.state = 'running' AND json_extract(j.attempted_by, '$[#-1]') = worker_heartbeats.worker_id)
RETURNING worker_id`
)

// rescuePostgres returns to the queue the running jobs of the workers
// whose heartbeats were just deleted ($2) or that restarted since, or
// discards those out of attempts (as River's own rescuer does).
var rescuePostgres = fmt.Sprintf(`WITH lapsed AS (
  SELECT j.id FROM river_job j
  LEFT JOIN worker_heartbeats h ON h.worker_id = j.attempted_by[array_length(j.attempted_by, 1)]
  WHERE j.state = 'running' AND (j.attempted_by[array_length(j.attempted_by, 1)] = ANY ($2::text[]) OR j.attempted_at < h.started_at)
  FOR UPDATE OF j
)
UPDATE river_job j SET
  state = CASE WHEN j.attempt < j.max_attempts THEN 'available' ELSE 'discarded' END::river_job_state,
  finalized_at = CASE WHEN j.attempt < j.max_attempts THEN NULL ELSE now() END,
  scheduled_at = now(),
  errors = array_append(j.errors, jsonb_build_object('at', now(), 'attempt', j.attempt, 'trace', '',
    'error', %s))
FROM lapsed l WHERE j.id = l.id AND j.state = 'running'
RETURNING j.id, j.kind, j.attempted_by[array_length(j.attempted_by, 1)], j.state::text`,
	fmt.Sprintf(rescueMessage, "j.attempted_by[array_length(j.attempted_by, 1)]"))

// rescueSQLite is rescuePostgres for riversqlite's encoding: times as
// text, attempted_by and errors JSON, $2 a JSON array. A River time has
// milliseconds, so a job counts as an earlier run's only when attempted a
// millisecond or more before the run started.
var rescueSQLite = fmt.Sprintf(`UPDATE river_job SET
  state = CASE WHEN attempt < max_attempts THEN 'available' ELSE 'discarded' END,
  finalized_at = CASE WHEN attempt < max_attempts THEN NULL ELSE strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now') END,
  scheduled_at = strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now'),
  errors = jsonb(json_insert(json(coalesce(errors, jsonb('[]'))), '$[#]', json_object(
    'at', strftime('%%Y-%%m-%%dT%%H:%%M:%%fZ', 'now'), 'attempt', attempt, 'trace', '',
    'error', %s)))
WHERE river_job.state = 'running' AND (
  json_extract(river_job.attempted_by, '$[#-1]') IN (SELECT value FROM json_each($2))
  OR EXISTS (SELECT 1 FROM worker_heartbeats h WHERE h.worker_id = json_extract(river_job.attempted_by, '$[#-1]')
    AND CAST(unixepoch(river_job.attempted_at, 'subsec') * 1000000 AS INTEGER) + 1000 < h.started_at))
RETURNING id, kind, json_extract(attempted_by, '$[#-1]'), state`,
	fmt.Sprintf(rescueMessage, "json_extract(river_job.attempted_by, '$[#-1]')"))

// lapsedPostgres and lapsedSQLite say whether a rescue would find a job.
const (
	lapsedPostgres = `SELECT EXISTS (SELECT 1 FROM river_job j
  JOIN worker_heartbeats h ON h.worker_id = j.attempted_by[array_length(j.attempted_by, 1)]
  WHERE j.state = 'running' AND (h.expires_at <= now() OR j.attempted_at < h.started_at))`
	lapsedSQLite = `SELECT EXISTS (SELECT 1 FROM river_job j
  JOIN worker_heartbeats h ON h.worker_id = json_extract(j.attempted_by, '$[#-1]')
  WHERE j.state = 'running' AND (h.expires_at <= {now} OR CAST(unixepoch(j.attempted_at, 'subsec') * 1000000 AS INTEGER) + 1000 < h.started_at))`
)

// RescueLapsed returns to the queue, at once, the running jobs whose
// worker's heartbeat lapsed or whose worker restarted since their attempt
// began (jobs.Liveness); rescuer names the worker doing it. A worker with
// no heartbeat row (one older than migration 0019) is left to River's own
// rescuer.
func (s *Store) RescueLapsed(ctx context.Context, rescuer string) ([]jobs.Rescued, error) {
	q, probe := rescuePostgres, lapsedPostgres
	if s.d.Name == "sqlite" {
		q, probe = rescueSQLite, lapsedSQLite
	}
	// Nearly always there is nothing to rescue: one read says so, and on
	// SQLite it takes no write lock.
	var found bool
	if err := s.autocommit(ctx, func(t *txn) error { return t.queryRow(ctx, probe).Scan(&found) }); err != nil {
		return nil, fmt.Errorf("looking for the jobs of lapsed workers: %w", err)
	}
	if !found {
		return nil, nil
	}
	var out []jobs.Rescued
	err := s.inTx(ctx, func(t *txn) error {
		out = out[:0]
		dropped, err := s.dropLapsed(ctx, t)
		if err != nil {
			return err
		}
		rows, err := t.query(ctx, q, rescuer, dropped)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r jobs.Rescued
			var state string
			if err := rows.Scan(&r.JobID, &r.Kind, &r.Worker, &state); err != nil {
				return err
			}
			r.Discarded = state == "discarded"
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("returning the jobs of lapsed workers to the queue: %w", err)
	}
	return out, nil
}

// dropLapsed deletes the lapsed heartbeats of workers with running jobs
// and returns their ids, as a text array (PostgreSQL) or a JSON array.
func (s *Store) dropLapsed(ctx context.Context, t *txn) (any, error) {
	q := dropLapsedPostgres
	if s.d.Name == "sqlite" {
		q = dropLapsedSQLite
	}
	rows, err := t.query(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ids := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if s.d.Name != "sqlite" {
		return ids, nil
	}
	b, err := json.Marshal(ids)
	return string(b), err
}

// HeartbeatGC deletes the heartbeats lapsed before before: a worker's
// row outlives it long enough for any live worker to rescue its jobs
// (seconds), then goes.
func (s *Store) HeartbeatGC(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.inTx(ctx, func(t *txn) (err error) {
		n, err = t.exec(ctx, `DELETE FROM worker_heartbeats WHERE expires_at < $1`, s.d.T(before))
		return err
	})
	return n, err
}
