package worker

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/riverqueue/river"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/store"
)

// Live is the worker a configuration reload swaps. Each job runs to its
// end on the Worker current when it started; the jobs started after a
// swap run on the new one. What the job runner fixed at its start (the
// queues, the scheduled jobs, [worker]) cannot change: Swap refuses a
// Worker that would need them to.
type Live struct {
	cur atomic.Pointer[generation]
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
	n, err := New(cfg, st, opts)
	if err != nil {
		return nil, err
	}
	n.slots, n.unstored, n.metrics, n.persp = w.slots, w.unstored, w.metrics, w.persp
	for id := range n.crlTurn {
		if turn, ok := w.crlTurn[id]; ok {
			n.crlTurn[id] = turn
		}
	}
	return n, nil
}

// Swap makes next the Worker new jobs run on. It refuses (and changes
// nothing) when next works other queues or schedules other jobs than the
// current one: the job runner subscribed to those at its start. drained
// is closed once every job started on the Worker swapped out has ended,
// when its backends may be closed.
func (l *Live) Swap(next *Worker) (drained <-chan struct{}, err error) {
	cur := l.cur.Load().w
	if a, b := cur.Queues(), next.Queues(); !slices.Equal(a, b) {
		return nil, fmt.Errorf("the queues would change from %v to %v (a profile, an issuer's key or [notify] added or removed): restart the worker", a, b)
	}
	every := cur.conf.CRLIntervalMinutes
	if !reflect.DeepEqual(cur.Scheduled(0), next.Scheduled(0)) || every != next.conf.CRLIntervalMinutes {
		return nil, fmt.Errorf("the scheduled jobs would change (an issuer, a relay's renewal_info_per_run or worker.crl_interval_minutes): restart the worker")
	}
	old := l.cur.Swap(newGeneration(next))
	old.retire()
	return old.drained, nil
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
