package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// Recover re-queues subjects left processing since before olderThan with no
// outstanding job (a claim whose job was discarded, or whose abandon failed),
// so no client polls forever. A subject left so since before giveUpBefore
// is abandoned instead (serverInternal): re-queueing it has not helped, as
// when its job hangs every time until River gives it up (a signing token
// that never answers, a handler that ignores its deadline), and another
// round would leave its client polling on. It returns how many it
// re-queued and how many it abandoned; one failed subject does not stop
// the others.
func Recover(ctx context.Context, s Subjects, olderThan, giveUpBefore time.Time) (requeued, abandoned int, err error) {
	var errs []error
	hopeless, err := s.Stranded(ctx, giveUpBefore)
	if err != nil {
		return 0, 0, fmt.Errorf("listing subjects stranded since before %s: %w", giveUpBefore.Format(time.RFC3339), err)
	}
	for _, sub := range hopeless {
		p := acme.Problem{Type: acme.ProblemServerInternal, Detail: fmt.Sprintf("the CA could not finish this %s since before %s, after trying again; submit a new order", subjectNoun(sub.Kind), giveUpBefore.UTC().Format(time.RFC3339))}
		moved, err := s.Abandon(ctx, sub, p)
		if err != nil {
			errs = append(errs, fmt.Errorf("abandoning %s %s: %w", sub.Kind, sub.ID, err))
			continue
		}
		if moved { // else its verdict landed since it was listed
			abandoned++
		}
	}
	// The abandoned are no longer processing, so they are not listed again.
	stranded, err := s.Stranded(ctx, olderThan)
	if err != nil {
		return 0, abandoned, errors.Join(append(errs, fmt.Errorf("listing stranded subjects: %w", err))...)
	}
	for _, sub := range stranded {
		if err := s.Requeue(ctx, sub); err != nil {
			errs = append(errs, fmt.Errorf("re-queueing %s %s: %w", sub.Kind, sub.ID, err))
			continue
		}
		requeued++
	}
	return requeued, abandoned, errors.Join(errs...)
}

// subjectNoun names the work on a subject of kind for a client.
func subjectNoun(kind string) string {
	switch kind {
	case KindChallengeValidate:
		return "validation"
	case KindSignerIssue:
		return "issuance"
	}
	return "work"
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
