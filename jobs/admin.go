package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// ErrJobNotFound is returned by Show, Retry and Cancel for an unknown job id.
var ErrJobNotFound = errors.New("jobs: job not found")

// JobInfo is one job as the CLI and the admin panel show it.
type JobInfo struct {
	ID          int64
	Kind        string
	Queue       string
	State       string // available, scheduled, running, retryable, completed, cancelled, discarded, pending
	Attempt     int
	MaxAttempts int
	AttemptedBy []string // worker ids, one per attempt (River keeps the last 100)
	Args        json.RawMessage
	CreatedAt   time.Time
	ScheduledAt time.Time
	AttemptedAt *time.Time // start of the latest attempt
	FinalizedAt *time.Time
	Errors      []AttemptError
	// Deferred counts the runs deferred because the job's backend was
	// unavailable (Unavailable); none used an attempt. Deferrals are the
	// latest of them, oldest first.
	Deferred  int
	Deferrals []AttemptError
}

// AttemptError is one failed attempt of a job.
type AttemptError struct {
	At      time.Time
	Attempt int
	Error   string
}

// ListFilter narrows List; empty fields match everything.
type ListFilter struct {
	Kinds  []string
	Queues []string
	States []string
	Limit  int // default 100
}

// List returns jobs, newest first.
func List(ctx context.Context, q Queue, f ListFilter) ([]JobInfo, error) {
	a, err := adminOf(q)
	if err != nil {
		return nil, err
	}
	p := river.NewJobListParams().OrderBy(river.JobListOrderByID, river.SortOrderDesc)
	if f.Limit > 0 {
		p = p.First(f.Limit)
	}
	if len(f.Kinds) > 0 {
		p = p.Kinds(f.Kinds...)
	}
	if len(f.Queues) > 0 {
		p = p.Queues(f.Queues...)
	}
	if len(f.States) > 0 {
		states := make([]rivertype.JobState, len(f.States))
		for i, s := range f.States {
			states[i] = rivertype.JobState(s)
		}
		p = p.States(states...)
	}
	rows, err := a.list(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("listing jobs: %w", err)
	}
	out := make([]JobInfo, len(rows))
	for i, r := range rows {
		out[i] = infoOf(r)
	}
	return out, nil
}

// Show returns one job with its attempt log.
func Show(ctx context.Context, q Queue, id int64) (JobInfo, error) {
	return adminCall(ctx, q, id, "showing", admin.get)
}

// Retry makes a finished or waiting job available to run now. A running job
// is left alone.
func Retry(ctx context.Context, q Queue, id int64) (JobInfo, error) {
	return adminCall(ctx, q, id, "retrying", admin.retry)
}

// Cancel cancels a job; a running one has its context cancelled by its
// worker. The job's subject is left as it is: abandon or recover it.
func Cancel(ctx context.Context, q Queue, id int64) (JobInfo, error) {
	return adminCall(ctx, q, id, "cancelling", admin.cancel)
}

// RetryTx is Retry inside a store transaction (the store's JobTx.Jobs), so
// an operator's audit event commits with it.
func RetryTx(ctx context.Context, q Queue, tx Tx, id int64) (JobInfo, error) {
	return adminCall(ctx, q, id, "retrying", func(a admin, ctx context.Context, id int64) (*rivertype.JobRow, error) { return a.retryTx(ctx, tx, id) })
}

// CancelTx is Cancel inside a store transaction.
func CancelTx(ctx context.Context, q Queue, tx Tx, id int64) (JobInfo, error) {
	return adminCall(ctx, q, id, "cancelling", func(a admin, ctx context.Context, id int64) (*rivertype.JobRow, error) {
		return a.cancelTx(ctx, tx, id)
	})
}

type admin interface {
	list(ctx context.Context, p *river.JobListParams) ([]*rivertype.JobRow, error)
	get(ctx context.Context, id int64) (*rivertype.JobRow, error)
	retry(ctx context.Context, id int64) (*rivertype.JobRow, error)
	cancel(ctx context.Context, id int64) (*rivertype.JobRow, error)
	retryTx(ctx context.Context, tx Tx, id int64) (*rivertype.JobRow, error)
	cancelTx(ctx context.Context, tx Tx, id int64) (*rivertype.JobRow, error)
}

func adminOf(q Queue) (admin, error) {
	a, ok := q.(admin)
	if !ok {
		return nil, fmt.Errorf("jobs: %T is not a queue built by NewPostgres or NewSQLite", q)
	}
	return a, nil
}

func adminCall(ctx context.Context, q Queue, id int64, doing string, f func(admin, context.Context, int64) (*rivertype.JobRow, error)) (JobInfo, error) {
	a, err := adminOf(q)
	if err != nil {
		return JobInfo{}, err
	}
	row, err := f(a, ctx, id)
	if errors.Is(err, rivertype.ErrNotFound) {
		return JobInfo{}, fmt.Errorf("%s job %d: %w", doing, id, ErrJobNotFound)
	}
	if err != nil {
		return JobInfo{}, fmt.Errorf("%s job %d: %w", doing, id, err)
	}
	return infoOf(row), nil
}

func infoOf(r *rivertype.JobRow) JobInfo {
	j := JobInfo{
		ID:          r.ID,
		Kind:        r.Kind,
		Queue:       r.Queue,
		State:       string(r.State),
		Attempt:     r.Attempt,
		MaxAttempts: r.MaxAttempts,
		AttemptedBy: r.AttemptedBy,
		Args:        json.RawMessage(r.EncodedArgs),
		CreatedAt:   r.CreatedAt,
		ScheduledAt: r.ScheduledAt,
		AttemptedAt: r.AttemptedAt,
		FinalizedAt: r.FinalizedAt,
	}
	for _, e := range r.Errors {
		j.Errors = append(j.Errors, AttemptError{At: e.At, Attempt: e.Attempt, Error: e.Error})
	}
	d := deferralsOf(r.Metadata)
	j.Deferred, j.Deferrals = d.Count, d.Recent
	return j
}

func (q *riverQueue[TTx]) list(ctx context.Context, p *river.JobListParams) ([]*rivertype.JobRow, error) {
	if q.clientErr != nil {
		return nil, q.clientErr
	}
	res, err := q.client.JobList(ctx, p)
	if err != nil {
		return nil, err
	}
	return res.Jobs, nil
}

func (q *riverQueue[TTx]) get(ctx context.Context, id int64) (*rivertype.JobRow, error) {
	if q.clientErr != nil {
		return nil, q.clientErr
	}
	return q.client.JobGet(ctx, id)
}

func (q *riverQueue[TTx]) retry(ctx context.Context, id int64) (*rivertype.JobRow, error) {
	if q.clientErr != nil {
		return nil, q.clientErr
	}
	return q.client.JobRetry(ctx, id)
}

func (q *riverQueue[TTx]) cancel(ctx context.Context, id int64) (*rivertype.JobRow, error) {
	if q.clientErr != nil {
		return nil, q.clientErr
	}
	return q.client.JobCancel(ctx, id)
}

func (q *riverQueue[TTx]) retryTx(ctx context.Context, tx Tx, id int64) (*rivertype.JobRow, error) {
	if q.clientErr != nil {
		return nil, q.clientErr
	}
	t, ok := q.asTx(tx)
	if !ok {
		return nil, fmt.Errorf("transaction is a %T, not one of this queue's dialect", tx)
	}
	return q.client.JobRetryTx(ctx, t, id)
}

func (q *riverQueue[TTx]) cancelTx(ctx context.Context, tx Tx, id int64) (*rivertype.JobRow, error) {
	if q.clientErr != nil {
		return nil, q.clientErr
	}
	t, ok := q.asTx(tx)
	if !ok {
		return nil, fmt.Errorf("transaction is a %T, not one of this queue's dialect", tx)
	}
	return q.client.JobCancelTx(ctx, t, id)
}
