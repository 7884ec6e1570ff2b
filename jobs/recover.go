package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"
)

// Recover re-queues subjects left processing since before olderThan with no
// outstanding job (a claim whose job was discarded, or whose abandon failed),
// so no client polls forever. It returns how many it re-queued; one failed
// subject does not stop the others.
func Recover(ctx context.Context, s Subjects, olderThan time.Time) (int, error) {
	stranded, err := s.Stranded(ctx, olderThan)
	if err != nil {
		return 0, fmt.Errorf("listing stranded subjects: %w", err)
	}
	n := 0
	var errs []error
	for _, sub := range stranded {
		if err := s.Requeue(ctx, sub); err != nil {
			errs = append(errs, fmt.Errorf("re-queueing %s %s: %w", sub.Kind, sub.ID, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// HousekeepingEvery is the periodic job that enqueues HousekeepingArgs every
// interval (and once at start), for Settings.Periodic. Only the elected
// leader among running workers enqueues it.
func HousekeepingEvery(interval time.Duration) *river.PeriodicJob {
	return river.NewPeriodicJob(
		river.PeriodicInterval(interval),
		func() (river.JobArgs, *river.InsertOpts) { return HousekeepingArgs{}, nil },
		&river.PeriodicJobOpts{ID: KindHousekeeping, RunOnStart: true},
	)
}
