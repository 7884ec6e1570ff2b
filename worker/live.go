package worker

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/riverqueue/river"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/store"
)

// Live is the worker a configuration reload swaps. Each job runs to its
// end on the Worker current when it started; the jobs started after a
// swap run on the new one. The job runner's queues and scheduled jobs
// only grow (Swap, Follow); [worker], fixed at its start, cannot change.
type Live struct {
	cur      atomic.Pointer[generation]
	runner   atomic.Pointer[Follower]
	notifies bool // Registry registered the notify_send handler
}

// generation is one Worker and the jobs running on it.
type generation struct {
	w       *Worker
	running atomic.Int64
	retired atomic.Bool
	once    sync.Once
	drained chan struct{} // closed once retired and no job runs on it
}

func newGeneration(w *Worker) *generation {
	return &generation{w: w, drained: make(chan struct{})}
}

// NewLive starts with w.
func NewLive(w *Worker) *Live {
	l := &Live{}
	l.cur.Store(newGeneration(w))
	return l
}

// Current is the Worker new jobs run on.
func (l *Live) Current() *Worker { return l.cur.Load().w }

// acquire is the current generation, counted as running a job until
// release. A generation swapped out meanwhile is given back and the
// current one taken instead, so a retired generation's count only falls.
func (l *Live) acquire() *generation {
	for {
		g := l.cur.Load()
		g.running.Add(1)
		if l.cur.Load() == g {
			return g
		}
		g.release()
	}
}

func (g *generation) release() {
	if g.running.Add(-1) == 0 && g.retired.Load() {
		g.once.Do(func() { close(g.drained) })
	}
}

func (g *generation) retire() {
	g.retired.Store(true)
	if g.running.Load() == 0 {
		g.once.Do(func() { close(g.drained) })
	}
}

// Successor builds the Worker of cfg and opts over st to replace w: what outlives a
// reload (the validation slots, the CRL turns of the issuers both mount,
// certificates signed but not stored, the metrics) is w's. Its Registry
// option is ignored: w's metrics stay registered.
func (w *Worker) Successor(cfg Config, st store.Store, opts Options) (*Worker, error) {
	opts.Registry = nil
	// The managed issuers (rotation is data, not configuration) and the
	// runner that schedules a new one's CRLs carry over to the successor.
	w.issuersMu.RLock()
	runner := w.runner
	if opts.Load == nil {
		opts.Load = w.managed.load
	}
	w.issuersMu.RUnlock()
	opts.Managed = append(opts.Managed, w.managed.all()...)
	n, err := New(cfg, st, opts)
	if err != nil {
		return nil, err
	}
	n.runner = runner
	n.slots, n.unstored, n.metrics, n.persp = w.slots, w.unstored, w.metrics, w.persp
	for id := range n.crlTurn {
		if turn, ok := w.crlTurn[id]; ok {
			n.crlTurn[id] = turn
		}
	}
	return n, nil
}

// Follower is the job runner a Live extends when a reload adds queues or
// scheduled jobs (jobs.Runner).
type Follower interface {
	Follow(s jobs.Settings) error
}

// Follow has Swap extend r with the queues and scheduled jobs a new Worker
// adds. Without it Swap refuses any.
func (l *Live) Follow(r Follower) { l.runner.Store(&r) }

// Swap makes next the Worker new jobs run on, then has the job runner
// work the queues and insert the scheduled jobs next adds (a profile
// added, or mounted now). It refuses (and changes nothing) when next
// would drop a queue or a scheduled job (their jobs would be left
// unworked: an issuer's key changed, [notify] removed) or take notify
// jobs the runner has no handler for. drained is closed once every job
// started on the Worker swapped out has ended, when its backends may be
// closed.
func (l *Live) Swap(next *Worker) (drained <-chan struct{}, err error) {
	cur := l.cur.Load().w
	if lost := missing(cur.Queues(), next.Queues()); len(lost) > 0 {
		return nil, fmt.Errorf("the worker would stop working queues %v (an issuer's key changed or [notify] removed): restart the worker", lost)
	}
	if cur.notify == nil && next.notify != nil && !l.notifies {
		return nil, fmt.Errorf("[notify] was added: the worker registered no notification handler at its start: restart the worker")
	}
	every := cur.conf.CRLIntervalMinutes
	if !scheduledWithin(cur.Scheduled(0), next.Scheduled(0)) || every != next.conf.CRLIntervalMinutes {
		return nil, fmt.Errorf("the scheduled jobs would lose one (an issuer's key changed, a relay's renewal_info_per_run or worker.crl_interval_minutes): restart the worker")
	}
	r := l.runner.Load()
	grows := len(missing(next.Queues(), cur.Queues())) > 0 || !scheduledWithin(next.Scheduled(0), cur.Scheduled(0))
	if grows && r == nil {
		return nil, fmt.Errorf("the queues would change from %v to %v and no job runner follows them: restart the worker", cur.Queues(), next.Queues())
	}
	old := l.cur.Swap(newGeneration(next))
	old.retire()
	if r != nil {
		// After the swap, so that a job of a new queue finds its mount.
		if err := (*r).Follow(next.JobSettings()); err != nil {
			next.log.Error("the reload is applied but a new queue is not worked: restart the worker", "err", err)
		}
	}
	return old.drained, nil
}

// missing are the names of want not in have.
func missing(want, have []string) []string {
	var out []string
	for _, q := range want {
		if !slices.Contains(have, q) {
			out = append(out, q)
		}
	}
	return out
}

// scheduledWithin is whether every job of a is in b: the same kind for the
// same issuer. An upstream renewal's profile may change (a profile sorting
// first added on the same relay): the job it queues in the old profile's
// queue is still worked, as queues only grow.
func scheduledWithin(a, b []jobs.Scheduled) bool {
	for _, j := range a {
		if !slices.ContainsFunc(b, func(k jobs.Scheduled) bool { return scheduledKey(j) == scheduledKey(k) }) {
			return false
		}
	}
	return true
}

func scheduledKey(j jobs.Scheduled) string {
	switch a := j.Args.(type) {
	case jobs.UpstreamRenewalArgs:
		return a.Kind() + ":" + a.IssuerID
	default:
		return fmt.Sprintf("%s:%#v", a.Kind(), a)
	}
}

// Registry is Worker.Registry's handlers, each running on the current
// Worker.
func (l *Live) Registry() (*jobs.Registry, error) {
	reg := &jobs.Registry{}
	for _, err := range []error{
		jobs.Register(reg, via(l, (*Worker).validateChallenge)),
		jobs.Register(reg, via(l, (*Worker).issueOrder)),
		jobs.Register(reg, via(l, (*Worker).revokeCert)),
		jobs.Register(reg, via(l, (*Worker).generateCRL)),
		jobs.Register(reg, via(l, (*Worker).housekeeping)),
		jobs.Register(reg, via(l, (*Worker).refreshUpstreamRenewals)),
		jobs.Register(reg, via(l, (*Worker).checkAsPerspective)),
	} {
		if err != nil {
			return nil, err
		}
	}
	if l.Current().notify != nil {
		l.notifies = true
		notify := func(w *Worker, ctx context.Context, j jobs.Job[jobs.NotifySendArgs]) error { return w.notify(ctx, j) }
		if err := jobs.Register(reg, via(l, notify)); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// via runs h on the Worker current when the job starts, counted as one of
// its running jobs until h returns.
func via[T river.JobArgs](l *Live, h func(*Worker, context.Context, jobs.Job[T]) error) jobs.Handler[T] {
	return func(ctx context.Context, j jobs.Job[T]) error {
		g := l.acquire()
		defer g.release()
		return h(g.w, ctx, j)
	}
}
