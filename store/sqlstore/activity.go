package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/hallmark-ca/hallmark/store"
)

// The overview's recent history. Each statement counts one window's rows
// by hour and reads them through an index on the time it counts by:
// certificates_issued_idx, challenges_validated_idx, audit_events_at_idx
// and River's river_job_state_and_finalized_at_index (TestActivityPlans).
// Each returns (series, hour, count), the hour counted from $1, of the
// rows from $1 to $2. The upper bound is what makes PostgreSQL pick the
// index on a table never analysed: it takes an open range ("col >= $1")
// for a third of the table, a closed one for a sliver.

// activityQueries are the statements, as s's dialect needs them, with
// their arguments for a window from start.
func (s *Store) activityQueries(start, end time.Time) [][]any {
	hour := func(col string) string {
		if s.d == SQLite {
			return "((" + col + " - $1) / 3600000000)"
		}
		return "CAST(floor(extract(epoch FROM " + col + " - CAST($1 AS timestamptz)) / 3600) AS integer)"
	}
	// River keeps finalized_at as timestamptz on PostgreSQL, as text
	// (datetime('now', 'subsec'), UTC) on SQLite, where $1 is then the
	// window's start in that text form.
	jobHour := hour("finalized_at")
	from, to := s.d.T(start), s.d.T(end)
	jobFrom, jobTo := from, to
	if s.d == SQLite {
		jobHour = "((unixepoch(finalized_at) - unixepoch($1)) / 3600)"
		jobFrom, jobTo = start.UTC().Format(time.DateTime), end.UTC().Format(time.DateTime)
	}
	return [][]any{
		{`SELECT 'issued', ` + hour("issued_at") + `, count(*) FROM certificates WHERE issued_at >= $1 AND issued_at < $2 GROUP BY 2`, from, to},
		{`SELECT 'valid', ` + hour("validated_at") + `, count(*) FROM challenges WHERE validated_at >= $1 AND validated_at < $2 GROUP BY 2`, from, to},
		{`SELECT 'invalid', ` + hour("at") + `, count(*) FROM audit_events
WHERE at >= $1 AND at < $2 AND action = '` + store.ActionValidationFailed + `' GROUP BY 2`, from, to},
		{`SELECT CAST(state AS text), ` + jobHour + `, count(*) FROM river_job
WHERE state IN ('completed', 'cancelled', 'discarded') AND finalized_at >= $1 AND finalized_at < $2 GROUP BY 1, 2`, jobFrom, jobTo},
	}
}

func (s *Store) Activity(ctx context.Context, hours int) (store.Activity, error) {
	if hours < 1 || hours > store.MaxActivityHours {
		return store.Activity{}, fmt.Errorf("activity: %d hours is outside 1 to %d", hours, store.MaxActivityHours)
	}
	now, err := s.Now(ctx)
	if err != nil {
		return store.Activity{}, err
	}
	end := now.UTC().Truncate(time.Hour).Add(time.Hour)
	start := end.Add(-time.Duration(hours) * time.Hour)
	var a store.Activity
	err = s.inTx(ctx, func(t *txn) error {
		a = newActivity(start, hours)
		series := map[string][]int64{"issued": a.Issued, "valid": a.Valid, "invalid": a.Invalid,
			"completed": a.JobsCompleted, "cancelled": a.JobsFailed, "discarded": a.JobsFailed}
		for _, q := range s.activityQueries(start, end) {
			if err := collect(ctx, t, func(r Rows) error {
				var name string
				var h, n int64
				if err := r.Scan(&name, &h, &n); err != nil {
					return err
				}
				// A row outside the window (River's text times on SQLite
				// compare as text) is left out.
				if h >= 0 && h < int64(hours) {
					series[name][h] += n
				}
				return nil
			}, q[0].(string), q[1:]...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return store.Activity{}, fmt.Errorf("counting the last %d hours' activity: %w", hours, err)
	}
	return a, nil
}

func newActivity(start time.Time, hours int) store.Activity {
	return store.Activity{Start: start, Issued: make([]int64, hours), Valid: make([]int64, hours),
		Invalid: make([]int64, hours), JobsCompleted: make([]int64, hours), JobsFailed: make([]int64, hours)}
}
