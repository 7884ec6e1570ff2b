package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"github.com/riverqueue/river"
)

// queueConfig is River's configuration of one of s's queues.
func (s Settings) queueConfig(name string) river.QueueConfig {
	n := s.MaxWorkers
	if m := s.QueueMaxWorkers[name]; m > 0 {
		n = m
	}
	return river.QueueConfig{MaxWorkers: n}
}

// runner is a started River client and the scheduled jobs it inserts.
type runner[TTx any] struct {
	c           *river.Client[TTx]
	closeDriver func()
	stopKeeper  func()   // the heartbeat's (liveness.go), after River's stop
	started     Settings // as Start resolved them: the sizes Follow gives new queues

	mu        sync.Mutex // Follow against Follow and Stop
	queues    map[string]bool
	scheduled []Scheduled
	sctx      context.Context //nolint:containedctx // the scheduled jobs' lifetime, ended by Stop
	stop      context.CancelFunc
	wg        sync.WaitGroup
}

func newRunner[TTx any](ctx context.Context, c *river.Client[TTx], closeDriver func(), s Settings, stopKeeper func()) *runner[TTx] {
	r := &runner[TTx]{c: c, closeDriver: closeDriver, stopKeeper: stopKeeper, started: s, queues: map[string]bool{}}
	r.sctx, r.stop = context.WithCancel(context.WithoutCancel(ctx))
	for _, q := range s.Queues {
		r.queues[q] = true
	}
	for _, j := range s.Scheduled {
		r.startScheduled(j)
	}
	return r
}

func (r *runner[TTx]) startScheduled(j Scheduled) {
	r.scheduled = append(r.scheduled, j)
	r.wg.Go(func() { schedule(r.sctx, r.c, j, r.started.Logger) })
}

// Follow adds s's queues not worked yet through River's QueueBundle.Add
// (its producer starts at once) and starts s's scheduled jobs not
// inserted yet. Nothing is removed: a queue or a job s lacks keeps going.
func (r *runner[TTx]) Follow(s Settings) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sctx.Err() != nil {
		return errors.New("the job runner is stopping")
	}
	var errs []error
	for _, q := range s.Queues {
		if r.queues[q] {
			continue
		}
		if err := r.c.Queues().Add(q, r.started.queueConfig(q)); err != nil {
			errs = append(errs, fmt.Errorf("working queue %s: %w", q, err))
			continue
		}
		r.queues[q] = true
	}
	for _, j := range s.Scheduled {
		if !r.hasScheduled(j) {
			r.startScheduled(j)
		}
	}
	return errors.Join(errs...)
}

// Schedule works queue too, from now on, and inserts j now and every
// j.Every: an issuer made while the worker runs gets its CRL queue
// without a restart.
func (r *runner[TTx]) Schedule(queue string, j Scheduled) error {
	return r.Follow(Settings{Queues: []string{queue}, Scheduled: []Scheduled{j}})
}

func (r *runner[TTx]) hasScheduled(j Scheduled) bool {
	for _, have := range r.scheduled {
		if have.Every == j.Every && reflect.DeepEqual(have.Args, j.Args) {
			return true
		}
	}
	return false
}

// schedule inserts j now and every j.Every until ctx ends. A failed insert
// is logged and made again at the next tick.
func schedule[TTx any](ctx context.Context, client *river.Client[TTx], j Scheduled, log *slog.Logger) {
	t := time.NewTicker(j.Every)
	defer t.Stop()
	for {
		if _, err := client.Insert(ctx, j.Args, nil); err != nil && ctx.Err() == nil {
			log.Warn("inserting a scheduled job; trying again at the next tick", "kind", j.Args.Kind(), "every", j.Every, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Stop stops fetching and waits for running jobs; when ctx ends first their
// contexts are cancelled (River puts them back as available).
func (r *runner[TTx]) Stop(ctx context.Context) error {
	defer r.closeDriver()
	defer r.stopKeeper()
	r.mu.Lock()
	r.stop()
	r.mu.Unlock()
	r.wg.Wait()
	err := r.c.Stop(ctx)
	if err != nil && ctx.Err() != nil {
		hard, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err2 := r.c.StopAndCancel(hard); err2 != nil {
			return errors.Join(err, err2)
		}
		return nil
	}
	return err
}
