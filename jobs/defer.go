package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// DefaultDeferMax caps the wait between two tries of a job whose backend
// is unavailable (Settings.DeferMax): the longest a job waits after its
// backend returns.
const DefaultDeferMax = time.Minute

// Unavailable marks err as "the backend this job needs is unavailable"
// (a PKCS#11 token gone or hung, a relay's upstream unreachable, a custom
// hook answering unavailable): the job is deferred, with backoff, until
// its subject's deadline (an order's expiry, on the database's clock),
// and tried again each time; no attempt is used, so it is never given up
// for its number of tries. Past the deadline its subject fails with
// DeadlineProblem.
func Unavailable(err error, deadline time.Time) error {
	if err == nil {
		return nil
	}
	return &unavailableError{err: err, deadline: deadline}
}

type unavailableError struct {
	err      error
	deadline time.Time
}

func (e *unavailableError) Error() string { return "backend unavailable, deferred: " + e.err.Error() }
func (e *unavailableError) Unwrap() error { return e.err }

// deferralsKey is the job's metadata key of its deferral log.
const deferralsKey = "hallmark_deferrals"

// deferrals is a job's deferral log: how many, the latest few.
type deferrals struct {
	Count  int            `json:"count"`
	Recent []AttemptError `json:"recent"`
}

// keptDeferrals is how many deferrals a job's log keeps.
const keptDeferrals = 10

func deferralsOf(metadata []byte) deferrals {
	var m struct {
		D deferrals `json:"hallmark_deferrals"`
	}
	_ = json.Unmarshal(metadata, &m)
	return m.D
}

// DeadlineProblem is what a subject fails with when its backend stayed
// unavailable until its deadline.
func DeadlineProblem(kind string, deadline time.Time) acme.Problem {
	return acme.Problem{Type: acme.ProblemServerInternal, Detail: fmt.Sprintf(
		"the CA could not complete this %s in time: the backend it needs was unavailable until the %s expired at %s; submit a new order",
		subjectNoun(kind), deadlineNoun(kind), deadline.UTC().Format(time.RFC3339))}
}

func deadlineNoun(kind string) string {
	if kind == KindChallengeValidate {
		return "authorization"
	}
	return "order"
}

// deferJob defers a job whose backend is unavailable: a snooze until the
// next try (backoff from base to max by the deferrals so far, never past
// the deadline), logged in the job's metadata; or, at the deadline, fails
// its subject.
func (w *worker[T]) deferJob(ctx context.Context, rj *river.Job[T], u *unavailableError) (string, error) {
	now := time.Now()
	if k, _ := ctx.Value(keeperKey{}).(*keeper); k != nil {
		now = k.clock(ctx)
	}
	if !now.Before(u.deadline) {
		return OutcomeExpired, w.expire(ctx, rj, u)
	}
	d := deferralsOf(rj.Metadata)
	d.Count++
	d.Recent = append(d.Recent, AttemptError{At: now.UTC(), Attempt: rj.Attempt, Error: u.err.Error()})
	if len(d.Recent) > keptDeferrals {
		d.Recent = d.Recent[len(d.Recent)-keptDeferrals:]
	}
	if err := river.MetadataSet(ctx, deferralsKey, d); err != nil {
		w.env.logger.WarnContext(ctx, "logging a deferral in the job's metadata", "job_id", rj.ID, "err", err)
	}
	wait := min(backoff{base: w.env.deferBase, max: w.env.deferMax}.delay(d.Count), u.deadline.Sub(now)+time.Second)
	w.env.logger.WarnContext(ctx, "backend unavailable; job deferred", "job_id", rj.ID, "kind", rj.Kind,
		"deferrals", d.Count, "next_try_in", wait.Round(time.Millisecond), "deadline", u.deadline.UTC(), "err", u.err)
	return OutcomeDeferred, Snooze(wait)
}

// expire fails the subject of a job whose backend stayed unavailable past
// its deadline; the job is cancelled.
func (w *worker[T]) expire(ctx context.Context, rj *river.Job[T], u *unavailableError) error {
	sa, ok := any(rj.Args).(SubjectArgs)
	if !ok {
		return river.JobCancel(fmt.Errorf("deadline %s passed: %w", u.deadline.UTC().Format(time.RFC3339), u))
	}
	s := sa.SubjectOf()
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	moved, err := w.env.subjects.Abandon(actx, s, DeadlineProblem(s.Kind, u.deadline))
	if err != nil {
		// Not recorded: the job runs again and tries once more.
		return CouldNotRun(fmt.Errorf("failing %s %s past its deadline: %w", s.Kind, s.ID, err))
	}
	w.env.logger.ErrorContext(ctx, "backend unavailable until the subject's deadline", "job_id", rj.ID, "kind", rj.Kind,
		"subject", s.ID, "deadline", u.deadline.UTC(), "failed", moved, "err", u.err)
	return river.JobCancel(fmt.Errorf("backend unavailable until the deadline %s; %s %s failed: %w", u.deadline.UTC().Format(time.RFC3339), s.Kind, s.ID, u))
}

// isUnavailable returns err's Unavailable mark.
func isUnavailable(err error) (*unavailableError, bool) {
	var u *unavailableError
	return u, errors.As(err, &u)
}
