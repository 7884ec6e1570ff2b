package jobs

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// ErrLeaseLost is the cause of a job's context cancelled because its
// worker's heartbeat lapsed (a stall, a cut to the database): another
// worker may already run the job, so this one must record no verdict.
var ErrLeaseLost = errors.New("jobs: this worker's heartbeat lapsed; another worker may hold the job")

// DefaultHeartbeat is how long a worker may go without renewing its
// heartbeat before its running jobs are taken by another (Settings.Heartbeat).
const DefaultHeartbeat = 5 * time.Second

// Liveness is the workers' heartbeats on the database's clock, and the
// rescue of the jobs of a worker whose heartbeat lapsed: River's own
// rescuer waits RescueAfter (a minute) plus its pass interval, because it
// cannot tell a dead worker from a slow job; a heartbeat can.
type Liveness interface {
	// Beat registers worker's heartbeat when since is zero (a new run of
	// the id: jobs an earlier run left running are then rescued), else
	// renews the run begun at since until the database's now+bound (Revived
	// when it had expired but no worker took its jobs), or reports it
	// Lapsed (its jobs were taken) and changes nothing.
	Beat(ctx context.Context, worker string, since time.Time, bound time.Duration) (Beat, error)
	// RescueLapsed returns to the queue at once the running jobs of
	// workers whose heartbeat lapsed or that restarted since (those out
	// of attempts are discarded, as River's rescuer does), ending the
	// lapsed heartbeats so their workers find them Lapsed; rescuer names
	// the worker doing it, for the attempt log.
	RescueLapsed(ctx context.Context, rescuer string) ([]Rescued, error)
	// Now reads the database's clock.
	Now(ctx context.Context) (time.Time, error)
}

// Beat is a heartbeat's answer: the run's start and the database's now
// (for a live run), or Lapsed.
type Beat struct {
	Since, Now time.Time
	Lapsed     bool
	// Revived: the heartbeat had expired, but no worker had taken its
	// jobs, so it was renewed; every worker's does after a database outage.
	Revived bool
	// Taken: lapsed because another process registered the same id since,
	// which two workers with one worker.id do to each other.
	Taken bool
}

// Rescued is one job RescueLapsed took back.
type Rescued struct {
	JobID     int64
	Kind      string
	Worker    string // the worker whose heartbeat lapsed
	Discarded bool   // out of attempts: discarded, its subject left to Recover
}

// keeper renews this worker's heartbeat every bound/5, rescues lapsed
// workers' jobs, and cancels its own running jobs (ErrLeaseLost) when it
// finds its heartbeat ended (another worker took its jobs, or registered
// its id), before registering a new run.
type keeper struct {
	l     Liveness
	id    string
	bound time.Duration
	log   *slog.Logger
	m     *Metrics

	// renewing serializes renewals (the ticker's and a handler's check),
	// so a lapse is handled once, by one new run.
	renewing sync.Mutex

	mu    sync.Mutex
	since time.Time // the run's start, on the database's clock
	now   time.Time // the database's clock at the last renewal
	at    time.Time // when that renewal was sent, on this process's monotonic clock
	lost  bool      // lapsed and not registered again yet
	held  map[*heldJob]struct{}
	// streak is the database's clock when the current unbroken run of
	// renewals began (zero after a failed one): a worker rescues others
	// only after a whole bound of it, so after an outage every live worker
	// has renewed before anyone's jobs are taken.
	streak time.Time
}

type heldJob struct{ cancel context.CancelCauseFunc }

type keeperKey struct{}

func newKeeper(l Liveness, id string, bound time.Duration, log *slog.Logger, m *Metrics) *keeper {
	return &keeper{l: l, id: id, bound: bound, log: log, m: m, held: map[*heldJob]struct{}{}}
}

// register begins a new run of the heartbeat.
func (k *keeper) register(ctx context.Context) error {
	at := time.Now()
	b, err := k.l.Beat(ctx, k.id, time.Time{}, k.bound)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.since, k.now, k.at, k.lost, k.streak = b.Since, b.Now, at, false, b.Now
	k.mu.Unlock()
	return nil
}

// run renews and rescues every bound/5 until ctx ends.
func (k *keeper) run(ctx context.Context) {
	t := time.NewTicker(k.bound / 5)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		k.renew(ctx)
		k.rescue(ctx)
	}
}

// renew renews the heartbeat; a lapse cancels every running job and
// begins a new run.
func (k *keeper) renew(ctx context.Context) bool {
	k.renewing.Lock()
	defer k.renewing.Unlock()
	k.mu.Lock()
	since, lost := k.since, k.lost
	k.mu.Unlock()
	if lost {
		return k.reregister(ctx)
	}
	at := time.Now()
	rctx, cancel := context.WithTimeout(ctx, k.bound/2)
	defer cancel()
	b, err := k.l.Beat(rctx, k.id, since, k.bound)
	if err != nil {
		k.log.Warn("renewing this worker's heartbeat failed; trying again", "bound", k.bound, "err", err)
		k.mu.Lock()
		k.streak = time.Time{}
		k.mu.Unlock()
		return false
	}
	if !b.Lapsed {
		k.mu.Lock()
		k.now, k.at = b.Now, at
		if b.Revived || k.streak.IsZero() {
			k.streak = b.Now
		}
		k.mu.Unlock()
		if b.Revived {
			k.log.Warn("this worker's heartbeat had expired (a stall, or the database out of reach) but no worker took its jobs: renewed, its jobs go on",
				"bound", k.bound)
		}
		return true
	}
	k.mu.Lock()
	k.lost = true
	n := len(k.held)
	for h := range k.held {
		h.cancel(ErrLeaseLost)
	}
	clear(k.held)
	k.mu.Unlock()
	if b.Taken {
		k.log.Error("another worker process registered this worker's id: give each worker its own worker.id (or leave it unset); until then each cancels the other's jobs",
			"worker", k.id, "cancelled", n)
	} else {
		k.log.Error("this worker's heartbeat lapsed (the process was stalled, or cut off from the database, longer than worker.heartbeat_ms) and another worker took its running jobs: they are cancelled here, and it records no verdict for them",
			"bound", k.bound, "cancelled", n)
	}
	return k.reregister(ctx)
}

func (k *keeper) reregister(ctx context.Context) bool {
	if err := k.register(ctx); err != nil {
		k.log.Warn("registering this worker's heartbeat again failed; its jobs are cancelled until it succeeds", "err", err)
		return false
	}
	return true
}

// rescue returns lapsed workers' jobs to the queue, once this worker's
// own heartbeat has been renewed without a break for a whole bound.
func (k *keeper) rescue(ctx context.Context) {
	k.mu.Lock()
	steady := !k.streak.IsZero() && !k.lost && k.now.Sub(k.streak) >= k.bound
	k.mu.Unlock()
	if !steady {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, k.bound/2)
	defer cancel()
	rs, err := k.l.RescueLapsed(rctx, k.id)
	if err != nil {
		k.log.Warn("rescuing the jobs of lapsed workers failed; trying again", "err", err)
		return
	}
	for _, r := range rs {
		k.m.rescued(r.Kind)
		k.log.Warn("job of a worker whose heartbeat lapsed returned to the queue", "job_id", r.JobID, "kind", r.Kind,
			"lapsed_worker", r.Worker, "discarded", r.Discarded)
	}
}

// hold registers a job starting now, fetched at attempted (the database's
// clock), and returns its context, cancelled with ErrLeaseLost should the
// heartbeat lapse; a job fetched by an earlier run, or while the
// heartbeat is lapsed, is cancelled at once.
func (k *keeper) hold(ctx context.Context, attempted *time.Time) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.WithValue(ctx, keeperKey{}, k))
	h := &heldJob{cancel: cancel}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.lost || (attempted != nil && attempted.Before(k.since)) {
		cancel(ErrLeaseLost)
		return ctx, func() {}
	}
	k.held[h] = struct{}{}
	return ctx, func() {
		k.mu.Lock()
		delete(k.held, h)
		k.mu.Unlock()
		cancel(nil)
	}
}

// check is Held for a job of this keeper.
func (k *keeper) check(ctx context.Context) error {
	if errors.Is(context.Cause(ctx), ErrLeaseLost) {
		return ErrLeaseLost
	}
	k.mu.Lock()
	fresh := time.Since(k.at) < k.bound*3/4
	k.mu.Unlock()
	if fresh {
		return nil
	}
	// The last renewal is too old to vouch for the lease (a stall, a slow
	// database): renew now, and cancel this worker's jobs if it lapsed.
	if k.renew(context.WithoutCancel(ctx)); errors.Is(context.Cause(ctx), ErrLeaseLost) {
		return ErrLeaseLost
	}
	return nil
}

// clock reads the database's clock, or estimates it when the read fails.
func (k *keeper) clock(ctx context.Context) time.Time {
	if now, err := k.l.Now(ctx); err == nil {
		return now
	}
	return k.dbNow()
}

// dbNow estimates the database's clock: its time at the last renewal plus
// the time since on this process's monotonic clock.
func (k *keeper) dbNow() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.now.IsZero() {
		return time.Now()
	}
	return k.now.Add(time.Since(k.at))
}

// Held reports whether this worker still holds the job whose handler got
// ctx: ErrLeaseLost when its heartbeat lapsed, so another worker may run
// the job. A handler calls it just before recording a verdict; the
// verdict's compare-and-swap on its subject still decides a race that
// begins after the check.
func Held(ctx context.Context) error {
	k, _ := ctx.Value(keeperKey{}).(*keeper)
	if k == nil {
		return nil
	}
	return k.check(ctx)
}
