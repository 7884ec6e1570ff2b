package sqlstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/hallmark-ca/hallmark/store"
)

// The admin panel's summaries. The queue queries read River's own
// river_job table (the same one Stranded reads): counting there is one
// GROUP BY, where River's client API would page through every job.

// waitingStates are the River states of a job that has not run to its end
// and is not running: the queue's backlog.
const waitingStates = `('available', 'scheduled', 'retryable', 'pending')`

func (s *Store) Counts(ctx context.Context) (store.Counts, error) {
	c := store.Counts{Accounts: map[string]int64{}, Orders: map[string]int64{}}
	err := s.inTx(ctx, func(t *txn) error {
		c.Accounts, c.Orders = map[string]int64{}, map[string]int64{}
		for _, g := range []struct {
			q string
			m map[string]int64
		}{
			{`SELECT status, count(*) FROM accounts GROUP BY status`, c.Accounts},
			{`SELECT status, count(*) FROM orders GROUP BY status`, c.Orders},
		} {
			if err := collect(ctx, t, func(r Rows) error {
				var st string
				var n int64
				if err := r.Scan(&st, &n); err != nil {
					return err
				}
				g.m[st] = n
				return nil
			}, g.q); err != nil {
				return err
			}
		}
		return t.queryRow(ctx, `SELECT count(*),
  COALESCE(SUM(CASE WHEN revoked_at IS NOT NULL THEN 1 ELSE 0 END), 0),
  COALESCE(SUM(CASE WHEN not_after < {now} THEN 1 ELSE 0 END), 0)
FROM certificates`).Scan(&c.Certificates, &c.Revoked, &c.Expired)
	})
	if err != nil {
		return store.Counts{}, fmt.Errorf("counting records: %w", err)
	}
	return c, nil
}

func (s *Store) QueueDepth(ctx context.Context) (store.QueueDepth, error) {
	var d store.QueueDepth
	err := s.inTx(ctx, func(t *txn) error {
		d = store.QueueDepth{}
		if err := collect(ctx, t, func(r Rows) error {
			var qc store.QueueCount
			if err := r.Scan(&qc.Kind, &qc.State, &qc.Count); err != nil {
				return err
			}
			d.Rows = append(d.Rows, qc)
			return nil
		}, `SELECT kind, state, count(*) FROM river_job GROUP BY kind, state ORDER BY kind, state`); err != nil {
			return err
		}
		return t.queryRow(ctx, `SELECT COALESCE(MIN(id), 0) FROM river_job WHERE state IN `+waitingStates).Scan(&d.OldestWaitingID)
	})
	if err != nil {
		return store.QueueDepth{}, fmt.Errorf("measuring the job queue: %w", err)
	}
	return d, nil
}

// jobStates are River's job states (its river_job_state type). A state
// filter outside them matches no job: on PostgreSQL the column is that
// enum, and comparing it with another name is an error, not no rows.
var jobStates = []string{"available", "cancelled", "completed", "discarded", "pending", "retryable", "running", "scheduled"}

// jobIDsSQL is JobIDs' statement for f, with its arguments before the
// page's (where.page). The state is compared as River's type, not as text
// (CAST(state AS text) = $2 could use no index). River's indexes on kind
// (river_job_kind) and state (river_job_prioritized_fetching_index) are not
// in id order, so a filter reads all its jobs and sorts them, or the newest
// jobs until a page matches, as the planner judges (TestFleetListPlans).
func jobIDsSQL(f store.JobFilter) (string, []any) {
	var w where
	if f.Kind != "" {
		w.and(`kind = $?`, f.Kind)
	}
	if f.State != "" {
		w.and(`state = $?`, f.State)
	}
	return `SELECT id FROM river_job
` + w.page("id"), w.args
}

func (s *Store) JobIDs(ctx context.Context, f store.JobFilter, p store.Page) ([]int64, string, error) {
	before, limit, err := page(p)
	if err != nil {
		return nil, "", err
	}
	if f.State != "" && !slices.Contains(jobStates, f.State) {
		return nil, "", nil
	}
	q, args := jobIDsSQL(f)
	var ids []int64
	err = s.inTx(ctx, func(t *txn) error {
		ids = nil
		return collect(ctx, t, func(r Rows) error {
			var id int64
			if err := r.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
			return nil
		}, q, append(args, before, limit+1)...)
	})
	if err != nil {
		return nil, "", fmt.Errorf("listing jobs: %w", err)
	}
	n, next := cursor(ids, limit)
	return ids[:n], next, nil
}
