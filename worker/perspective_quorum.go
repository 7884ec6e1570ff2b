package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/worker/validate"
)

// corroborates reports whether this worker's validations need remote
// perspectives' corroboration ([challenge.perspectives] names some).
func (w *Worker) corroborates() bool { return len(w.quorum.Names) > 0 }

// needsCorroboration reports whether tgt's passing check is to be
// corroborated: perspectives are configured and an order using its
// authorization is of a profile with perspectives = true, or of one this
// worker does not mount (it cannot tell, so it asks). An authorization no
// order uses (newAuthz) is not: such a profile never reuses it.
func (w *Worker) needsCorroboration(ctx context.Context, tgt *store.ChallengeAuthz) (bool, error) {
	if !w.corroborates() {
		return false, nil
	}
	all := true
	for _, m := range w.mounts {
		all = all && m.profile.Perspectives
	}
	if all {
		return true, nil // every profile requires it: no read
	}
	profiles, err := w.st.perspectives.AuthzProfiles(ctx, tgt.Authz.ID)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(profiles, func(p string) bool {
		m, ok := w.mounts[p]
		return !ok || m.profile.Perspectives
	}), nil
}

// resumeCorroboration continues a validation whose primary check already
// passed and asked the perspectives (this job snoozed, or was retried):
// done is false when the primary has not answered yet, and the job
// validates as usual.
func (w *Worker) resumeCorroboration(ctx context.Context, tgt *store.ChallengeAuthz) (done bool, err error) {
	answers, now, err := w.st.perspectives.PerspectiveAnswers(ctx, tgt.Challenge.ID)
	if err != nil {
		return true, jobs.CouldNotRun(err)
	}
	if len(answers) == 0 || answers[0].Perspective != store.PerspectivePrimary {
		return false, nil
	}
	return true, w.decideQuorum(ctx, tgt, answers, now)
}

// askPerspectives records the primary's passing check and asks every
// perspective for theirs; it decides at once if they answer within
// perspectiveWaits, else snoozes until they do.
func (w *Worker) askPerspectives(ctx context.Context, tgt *store.ChallengeAuthz, res validate.Result, took time.Duration) error {
	primary := answerOf(tgt.Challenge.ID, store.PerspectivePrimary, res, took)
	if _, err := w.st.perspectives.PerspectivesAsk(ctx, primary, w.quorum.Names); err != nil {
		return jobs.CouldNotRun(err)
	}
	for _, d := range perspectiveWaits {
		select {
		case <-ctx.Done():
			return jobs.Snooze(perspectivePoll)
		case <-time.After(d):
		}
		answers, now, err := w.st.perspectives.PerspectiveAnswers(ctx, tgt.Challenge.ID)
		if err != nil {
			break // the snooze's next run reads them again
		}
		if len(answers) > 0 && w.missingAnswers(answers) == 0 {
			return w.decideQuorum(ctx, tgt, answers, now)
		}
	}
	return jobs.Snooze(perspectivePoll)
}

// perspectiveWaits are the pauses a primary takes, holding its slot, before
// each read of its perspectives' answers and before it snoozes: nearby
// perspectives answer within milliseconds, and a snooze waits for River's
// next fetch (a quarter of a second).
var perspectiveWaits = []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond}

// missingAnswers counts the configured perspectives with no answer among
// answers (the primary's first).
func (w *Worker) missingAnswers(answers []store.PerspectiveAnswer) int {
	missing := 0
	for _, n := range w.quorum.Names {
		if !slices.ContainsFunc(answers[1:], func(a store.PerspectiveAnswer) bool { return a.Perspective == n }) {
			missing++
		}
	}
	return missing
}

// decideQuorum records the verdict once every perspective has answered or
// the deadline (from the primary's answer, on the database's clock) has
// passed; until then it snoozes. A perspective that disagreed, could not
// check, or did not answer in time does not corroborate; more of those
// than the quorum allows make the challenge invalid, with a problem naming
// them.
func (w *Worker) decideQuorum(ctx context.Context, tgt *store.ChallengeAuthz, answers []store.PerspectiveAnswer, now time.Time) error {
	primary := answers[0]
	got := map[string]store.PerspectiveAnswer{}
	for _, a := range answers[1:] {
		got[a.Perspective] = a
	}
	deadline := time.Duration(w.quorum.DeadlineMS) * time.Millisecond
	left := primary.At.Add(deadline).Sub(now)
	if w.missingAnswers(answers) > 0 && left > 0 {
		return jobs.Snooze(min(perspectivePoll, left))
	}
	var failed []string
	var first *acme.Problem
	for _, n := range w.quorum.Names {
		a, ok := got[n]
		switch {
		case !ok:
			failed = append(failed, fmt.Sprintf("%s did not answer within %s", n, deadline))
		case a.Outcome != store.PerspectiveValid:
			failed = append(failed, fmt.Sprintf("%s saw %s: %s", n, problemType(a.Problem), problemDetail(a.Problem)))
			if first == nil && a.Problem != nil && a.Outcome == store.PerspectiveInvalid {
				first = a.Problem
			}
		}
	}
	var p *acme.Problem
	if allowed := w.quorum.Allowed(); len(failed) > allowed {
		p = &acme.Problem{Type: acme.ProblemServerInternal}
		if first != nil {
			p.Type = first.Type
		}
		p.Detail = fmt.Sprintf("%d of %d network perspectives did not corroborate the validation (at most %d may): %s",
			len(failed), len(w.quorum.Names), allowed, strings.Join(failed, "; "))
	}
	if err := w.recordVerdict(ctx, tgt, p, primary.Record); err != nil {
		return err
	}
	w.countPerspectives(got)
	return nil
}

// perspectiveResults are the values of hallmark_perspective_answers_total's
// result: a perspective that saw what the primary saw, one that saw
// something else (an attack on one view, or views that differ), one whose
// check could not run there (its resolvers or egress are broken), and one
// that did not answer by the deadline (its workers are down or cut off).
var perspectiveResults = []string{"agreed", "disagreed", "error", "timeout"}

// countPerspectives counts each perspective's part in a recorded verdict.
func (w *Worker) countPerspectives(got map[string]store.PerspectiveAnswer) {
	for _, n := range w.quorum.Names {
		a, ok := got[n]
		switch {
		case !ok:
			w.persp.answers.WithLabelValues(n, "timeout").Inc()
			continue
		case a.Outcome == store.PerspectiveValid:
			w.persp.answers.WithLabelValues(n, "agreed").Inc()
		case a.Outcome == store.PerspectiveError:
			w.persp.answers.WithLabelValues(n, "error").Inc()
		default:
			w.persp.answers.WithLabelValues(n, "disagreed").Inc()
		}
		w.persp.latency.WithLabelValues(n).Observe(a.Took.Seconds())
	}
}

func problemDetail(p *acme.Problem) string {
	if p == nil {
		return ""
	}
	return p.Detail
}

// recordVerdict records a corroborated challenge's verdict: valid when p is
// nil, else invalid with p, trailed as validateChallenge trails a failure.
func (w *Worker) recordVerdict(ctx context.Context, tgt *store.ChallengeAuthz, p *acme.Problem, record json.RawMessage) error {
	ch, authz := &tgt.Challenge, &tgt.Authz
	v := store.Verdict{ChallengeID: ch.ID, Status: acme.StatusValid, ValidationRecord: record, Corroborated: true}
	if p != nil {
		p.Identifier = &authz.Identifier
		v.Status, v.Error = acme.StatusInvalid, p
		ev := w.trailEvent(ctx, authz.AccountID, store.ActionValidationFailed, ch.ID,
			fmt.Sprintf("%s of %s: %s: %s", ch.Type, authz.Identifier, p.Type, p.Detail))
		v.Trail = &ev
	}
	w.metrics.validated(ch.Type, p, false)
	w.log.InfoContext(ctx, "challenge validated", "challenge", ch.ID, "identifier", authz.Identifier.String(),
		"type", ch.Type, "status", v.Status, "problem", problemType(v.Error), "perspectives", len(w.quorum.Names))
	err := w.st.validate.ChallengeVerdict(ctx, v)
	if errors.Is(err, store.ErrConflict) {
		return nil
	}
	if err != nil {
		return jobs.CouldNotRun(fmt.Errorf("recording verdict for challenge %s: %w", ch.ID, err))
	}
	return nil
}
