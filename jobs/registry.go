package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"github.com/riverqueue/river"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/origin"
)

// Job is what a handler sees of the job it works.
type Job[T any] struct {
	ID          int64
	Kind        string
	Attempt     int // 1 on the first attempt
	MaxAttempts int
	Args        T
	WorkerID    string // this worker, as recorded in the job's attempted_by
	// Origin is the request that queued the job (its id, client address,
	// user agent), from the job's metadata; zero for a job an operator,
	// housekeeping or a schedule queued. The handler's context carries it
	// too (origin.FromContext), so its log lines name the request.
	Origin origin.Origin
}

// Handler works one job. It records its verdict through a store method
// that commits it in one transaction, and returns nil; River then marks the
// job completed, after that commit, in one batched update for many jobs
// (within ~250 ms). Completing the job inside the verdict's transaction
// (river.JobCompleteTx) cost about 3 times the database time per job and
// held the verdict's row locks longer (BenchmarkComplete).
//
// A worker can die after the verdict committed and before River marks the
// job completed: the job stays running, River rescues it after RescueAfter
// and runs it again. So a handler first checks its subject and returns nil
// when it is no longer processing: no verdict is lost or recorded twice, and
// the cost is one read. It returns:
//   - nil when the work is finished (a verdict recorded, pass or fail);
//   - CouldNotRun(err) when the attempt could not happen (the database was
//     unreachable, this worker cannot do the job): River retries it with
//     backoff, and abandons the subject once attempts run out;
//   - Snooze(d) when the job must wait its turn: it runs again after d,
//     and the run counts as no attempt;
//   - any other error when the handler is broken: the subject is abandoned
//     with a serverInternal problem and the job cancelled, never retried.
type Handler[T river.JobArgs] func(ctx context.Context, job Job[T]) error

// RecordOutput keeps v (as JSON) as the output of the job whose handler got
// ctx: River writes it into the job's metadata ("output") when it completes
// the job, in the same update, so a reader never sees the job completed
// without it. Call it only just before returning nil: River writes the
// metadata of a failed attempt too, and a reader would take a retried
// attempt's output for the job's answer.
func RecordOutput(ctx context.Context, v any) error {
	return river.RecordOutput(ctx, v)
}

// Registry holds the one handler per kind. The zero value is ready to use.
type Registry struct {
	mu    sync.Mutex
	kinds map[string]registration
}

type registration struct {
	add        func(w *river.Workers, env *runEnv) error
	hasSubject bool
}

// Register adds the handler for T's kind. A second handler for a kind is an
// error: one handler covers every profile.
func Register[T river.JobArgs](r *Registry, h Handler[T]) error {
	var zero T
	kind := zero.Kind()
	if h == nil {
		return fmt.Errorf("registering a handler for %s: handler is nil", kind)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.kinds[kind]; dup {
		return fmt.Errorf("registering a handler for %s: kind already has a handler; one handler must cover every profile", kind)
	}
	if r.kinds == nil {
		r.kinds = make(map[string]registration)
	}
	_, hasSubject := any(zero).(SubjectArgs)
	r.kinds[kind] = registration{
		hasSubject: hasSubject,
		add: func(w *river.Workers, env *runEnv) error {
			return river.AddWorkerSafely[T](w, &worker[T]{handle: h, env: env})
		},
	}
	return nil
}

// Kinds lists the registered kinds, sorted.
func (r *Registry) Kinds() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.kinds))
	for k := range r.kinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// runEnv is what every handler wrapper of one started client shares.
type runEnv struct {
	subjects Subjects
	logger   *slog.Logger
	workerID string
	metrics  *Metrics
	keeper   *keeper // nil: no heartbeat (Settings.Liveness unset)
	// deferBase and deferMax shape the backoff of Unavailable jobs.
	deferBase, deferMax time.Duration
}

func (r *Registry) workers(env *runEnv) (*river.Workers, error) {
	if r == nil {
		return nil, errors.New("starting the job runner: no registry")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.kinds) == 0 {
		return nil, errors.New("starting the job runner: no handlers registered")
	}
	w := river.NewWorkers()
	for kind, reg := range r.kinds {
		if reg.hasSubject && env.subjects == nil {
			return nil, fmt.Errorf("starting the job runner: %s jobs work on a subject a client polls, so Settings.Subjects must be set to abandon it when the handler breaks", kind)
		}
		if err := reg.add(w, env); err != nil {
			return nil, fmt.Errorf("registering the %s worker with river: %w", kind, err)
		}
	}
	return w, nil
}

// abandonProblem is what a client sees on a subject whose handler broke.
var abandonProblem = acme.Problem{
	Type:   acme.ProblemServerInternal,
	Detail: "the server hit an internal error while processing this request; try again with a new request",
}

// worker adapts a Handler to River: it applies the retry rule ("retry only
// when the attempt could not happen") and abandons the subject otherwise.
type worker[T river.JobArgs] struct {
	river.WorkerDefaults[T]
	handle Handler[T]
	env    *runEnv
}

func (w *worker[T]) Work(ctx context.Context, rj *river.Job[T]) error {
	ctx = withOrigin(ctx, originOf(rj.Metadata))
	if k := w.env.keeper; k != nil {
		// Cancelled with ErrLeaseLost should this worker's heartbeat lapse.
		var release func()
		ctx, release = k.hold(ctx, rj.AttemptedAt)
		defer release()
	}
	start := time.Now()
	err := w.run(ctx, rj)
	if u, ok := isUnavailable(err); ok && !leaseLost(ctx, err) {
		outcome, err := w.deferJob(ctx, rj, u)
		w.env.metrics.observe(rj.Kind, outcome, time.Since(start))
		return err
	}
	outcome := outcomeOf(ctx, err, rj.Attempt < rj.MaxAttempts)
	w.env.metrics.observe(rj.Kind, outcome, time.Since(start))
	if err == nil {
		return nil
	}
	switch {
	case outcome != OutcomeAbandoned:
		// Snoozed: River runs it later, the attempt not counted. Stopped:
		// the client is stopping, an operator cancelled the job, or this
		// worker's heartbeat lapsed, which is not the handler's fault.
		// Retried: River retries with backoff.
		return err
	case IsCouldNotRun(err):
		// Out of attempts: River discards the job; the client must not poll
		// forever.
		return errors.Join(fmt.Errorf("giving up after %d attempts: %w", rj.Attempt, err), w.abandon(ctx, rj, err))
	default:
		return river.JobCancel(errors.Join(fmt.Errorf("handler failed, not retrying: %w", err), w.abandon(ctx, rj, err)))
	}
}

// outcomeOf names what a run's error means (hallmark_jobs_total).
func outcomeOf(ctx context.Context, err error, attemptsLeft bool) string {
	switch {
	case err == nil:
		return OutcomeCompleted
	case isSnooze(err):
		return OutcomeSnoozed
	case leaseLost(ctx, err), errors.Is(ctx.Err(), context.Canceled):
		return OutcomeStopped
	case IsCouldNotRun(err) && attemptsLeft:
		return OutcomeRetried
	default:
		return OutcomeAbandoned
	}
}

// leaseLost reports whether a run ended because this worker's heartbeat
// lapsed: another worker may hold the job, so nothing more is done here.
func leaseLost(ctx context.Context, err error) bool {
	return errors.Is(err, ErrLeaseLost) || errors.Is(context.Cause(ctx), ErrLeaseLost)
}

func (w *worker[T]) run(ctx context.Context, rj *river.Job[T]) (err error) {
	defer func() {
		if r := recover(); r != nil {
			stack := debug.Stack()
			if len(stack) > 2048 {
				stack = stack[:2048]
			}
			err = fmt.Errorf("handler panicked: %v\n%s", r, stack)
		}
	}()
	job := Job[T]{
		ID:          rj.ID,
		Kind:        rj.Kind,
		Attempt:     rj.Attempt,
		MaxAttempts: rj.MaxAttempts,
		Args:        rj.Args,
		WorkerID:    w.env.workerID,
		Origin:      origin.Of(ctx),
	}
	return w.handle(ctx, job)
}

// abandon records a serverInternal failure on the job's subject, if it has
// one. A failure to abandon is returned so it lands in the job's attempt log;
// Recover re-queues the subject later.
func (w *worker[T]) abandon(ctx context.Context, rj *river.Job[T], cause error) error {
	sa, ok := any(rj.Args).(SubjectArgs)
	if !ok {
		w.env.logger.ErrorContext(ctx, "job failed", "outcome", "no subject",
			"job_id", rj.ID, "kind", rj.Kind, "attempt", rj.Attempt, "error", cause)
		return nil
	}
	s := sa.SubjectOf()
	// The job's context may be the one that timed out; abandoning must
	// still happen.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	moved, err := w.env.subjects.Abandon(actx, s, abandonProblem)
	if err != nil {
		w.env.logger.ErrorContext(ctx, "job failed", "outcome", "abandon failed; recover re-queues the subject",
			"job_id", rj.ID, "kind", rj.Kind, "subject", s.ID, "error", cause, "abandon_error", err)
		return fmt.Errorf("abandoning %s %s: %w", s.Kind, s.ID, err)
	}
	if !moved {
		w.env.logger.ErrorContext(ctx, "job failed", "outcome", "subject already decided; left as it is",
			"job_id", rj.ID, "kind", rj.Kind, "subject", s.ID, "attempt", rj.Attempt, "error", cause)
		return nil
	}
	w.env.logger.ErrorContext(ctx, "job failed", "outcome", "subject abandoned with serverInternal",
		"job_id", rj.ID, "kind", rj.Kind, "subject", s.ID, "attempt", rj.Attempt, "error", cause)
	return nil
}
