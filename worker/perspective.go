package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/worker/validate"
)

// Multi-perspective validation (CA/B BR §3.2.2.9). The primary, the worker
// that takes a challenge_validate job, checks first; when it passes, it
// records its answer and queues one perspective_check job per configured
// perspective in one transaction (store.PerspectivesAsk), reads their
// answers a few times over 155 ms (perspectiveWaits), then snoozes,
// holding no slot. Each perspective, a worker started with
// worker.perspective, runs the same check (challenge and CAA) with its own
// resolvers and records its answer. The primary wakes, and once every
// perspective has answered or the deadline has passed it decides by the
// quorum (perspective_quorum.go).

// perspectiveStore is the part of the store multi-perspective validation uses.
type perspectiveStore interface {
	PerspectivesAsk(ctx context.Context, primary store.PerspectiveAnswer, names []string) (bool, error)
	PerspectiveAnswer(ctx context.Context, a store.PerspectiveAnswer) error
	PerspectiveAnswers(ctx context.Context, challengeID string) ([]store.PerspectiveAnswer, time.Time, error)
	AuthzProfiles(ctx context.Context, authzID string) ([]string, error)
}

// perspectivePoll is how often a primary waiting for its perspectives looks
// at their answers (one read each time), within the deadline.
const perspectivePoll = 200 * time.Millisecond

// perspectiveMetrics are each perspective's, as the primary that decided saw them.
type perspectiveMetrics struct {
	answers *prometheus.CounterVec
	latency *prometheus.HistogramVec
}

func newPerspectiveMetrics() perspectiveMetrics {
	return perspectiveMetrics{
		answers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hallmark_perspective_answers_total",
			Help: "Remote perspectives' answers at a corroborated validation's verdict, by perspective and result (agreed; disagreed: it saw something else; error: it could not run the check; timeout: no answer by the deadline).",
		}, []string{"perspective", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hallmark_perspective_latency_seconds",
			Help:    "Time a remote perspective's check took, by perspective.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"perspective"}),
	}
}

// checkAsPerspective runs one perspective_check job on a perspective
// worker: the challenge's check from here, recorded as this perspective's
// answer. A challenge already decided is not checked: the answer would
// change nothing.
func (w *Worker) checkAsPerspective(ctx context.Context, job jobs.Job[jobs.PerspectiveCheckArgs]) error {
	args := job.Args
	if args.Perspective != w.conf.Perspective {
		return jobs.CouldNotRun(fmt.Errorf("perspective %s's check reached worker %s, which serves perspective %q", args.Perspective, w.id, w.conf.Perspective))
	}
	tgt, err := w.st.validate.ChallengeWithAuthz(ctx, args.ChallengeID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return jobs.CouldNotRun(fmt.Errorf("loading challenge %s: %w", args.ChallengeID, err))
	}
	if tgt.Challenge.Status != acme.StatusProcessing {
		return nil
	}
	if answered, err := w.answered(ctx, args); err != nil || answered {
		return err // a rerun (the worker died before River completed the job): the answer stands
	}
	started := time.Now()
	res := w.runCheck(ctx, tgt)
	if ctx.Err() != nil {
		return jobs.CouldNotRun(fmt.Errorf("checking challenge %s as perspective %s: %w", args.ChallengeID, args.Perspective, ctx.Err()))
	}
	a := answerOf(args.ChallengeID, args.Perspective, res, time.Since(started))
	w.log.InfoContext(ctx, "perspective answered", "perspective", args.Perspective, "challenge", args.ChallengeID,
		"identifier", tgt.Authz.Identifier.String(), "outcome", a.Outcome, "problem", problemType(a.Problem))
	if err := w.st.perspectives.PerspectiveAnswer(ctx, a); err != nil {
		return jobs.CouldNotRun(err)
	}
	return nil
}

// answered reports whether the perspective has answered for the challenge already.
func (w *Worker) answered(ctx context.Context, args jobs.PerspectiveCheckArgs) (bool, error) {
	answers, _, err := w.st.perspectives.PerspectiveAnswers(ctx, args.ChallengeID)
	if err != nil {
		return false, jobs.CouldNotRun(err)
	}
	for _, a := range answers {
		if a.Perspective == args.Perspective {
			return true, nil
		}
	}
	return false, nil
}

// runCheck is the check a challenge asks for, from this worker.
func (w *Worker) runCheck(ctx context.Context, tgt *store.ChallengeAuthz) validate.Result {
	ch, authz := &tgt.Challenge, &tgt.Authz
	return w.validator.Validate(ctx, validate.Request{
		Identifier:       authz.Identifier,
		Wildcard:         authz.Wildcard,
		Type:             ch.Type,
		Token:            ch.Token,
		KeyAuthorization: ch.Token + "." + tgt.Thumbprint,
		AccountURI:       w.accountURI(authz.AccountID),
	})
}

// answerOf is a check's result as a perspective's answer.
func answerOf(challengeID, perspective string, res validate.Result, took time.Duration) store.PerspectiveAnswer {
	a := store.PerspectiveAnswer{ChallengeID: challengeID, Perspective: perspective, Outcome: store.PerspectiveValid, Took: took}
	switch {
	case res.Err != nil:
		a.Outcome = store.PerspectiveError
		a.Problem = &acme.Problem{Type: acme.ProblemServerInternal, Detail: "the check could not run from this perspective: " + res.Err.Error()}
	case res.Problem != nil:
		a.Outcome, a.Problem = store.PerspectiveInvalid, res.Problem
	}
	if rec, err := json.Marshal(res.Record); err == nil {
		a.Record = rec
	}
	return a
}

// queueMaxWorkers bounds the queues whose jobs mostly wait on the network
// at worker.validation_concurrency (JobSettings).
func (w *Worker) queueMaxWorkers() map[string]int {
	if w.conf.Perspective != "" {
		return map[string]int{jobs.PerspectiveQueue(w.conf.Perspective): w.conf.ValidationConcurrency}
	}
	return map[string]int{jobs.QueueValidate: w.conf.ValidationConcurrency}
}
