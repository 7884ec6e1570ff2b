package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/policy"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/worker/validate"
)

// validator is what the challenge handler needs from worker/validate.
type validator interface {
	Validate(ctx context.Context, r validate.Request) validate.Result
	// CheckCAA is CAA alone, for issuance's check of an old validation.
	CheckCAA(ctx context.Context, identifier acme.Identifier, wildcard bool, method acme.ChallengeType, accountURI string) (*acme.Problem, error)
}

// validateChallenge runs one challenge_validate job: it validates, then
// records the verdict in one transaction; River completes the job once this
// returns nil. A job whose account holds its share of this worker's
// validation slots is snoozed instead (accountSlots).
func (w *Worker) validateChallenge(ctx context.Context, job jobs.Job[jobs.ChallengeValidateArgs]) error {
	args := job.Args
	// One read: the challenge, its authorization and the account's
	// thumbprint (the foreign keys guarantee the last two exist).
	tgt, err := w.st.validate.ChallengeWithAuthz(ctx, args.ChallengeID)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("challenge %s does not exist: %w", args.ChallengeID, err)
	}
	if err != nil {
		return jobs.CouldNotRun(fmt.Errorf("loading challenge %s: %w", args.ChallengeID, err))
	}
	ch, authz := &tgt.Challenge, &tgt.Authz
	if ch.Status != acme.StatusProcessing {
		// Already decided (a verdict is terminal; for example a rescued job
		// whose worker died after the verdict committed), or abandoned:
		// nothing to do.
		return nil
	}
	if w.corroborates() {
		// Its primary check done, it waits on the perspectives, holding no slot.
		if done, err := w.resumeCorroboration(ctx, tgt); done {
			return err
		}
	}
	started := time.Now()
	if wait, ok := w.slots.take(authz.AccountID, started); !ok {
		return jobs.Snooze(wait)
	}
	defer func() { w.slots.give(authz.AccountID, started, time.Now()) }()
	req, err := w.validationRequest(ctx, tgt)
	if err != nil {
		return jobs.CouldNotRun(fmt.Errorf("validating challenge %s: %w", ch.ID, err))
	}
	res := w.validator.Validate(ctx, req)
	if ctx.Err() != nil {
		// The worker is stopping or the job timed out mid-attempt: that is
		// no verdict on the challenge. Leave it for another attempt.
		return jobs.CouldNotRun(fmt.Errorf("validating challenge %s: %w", ch.ID, ctx.Err()))
	}
	if res.Err != nil {
		// The check could not happen (this worker's resolvers are down or
		// not configured): the CA's failure, not the client's. Retried
		// with backoff, and abandoned with serverInternal after the last
		// attempt, like any attempt that could not run.
		w.log.WarnContext(ctx, "challenge check failed", "outcome", "the check could not run; the job will be retried",
			"challenge", ch.ID, "identifier", authz.Identifier.String(), "err", res.Err)
		w.metrics.validated(ch.Type, nil, true)
		return jobs.CouldNotRun(fmt.Errorf("validating challenge %s: %w", ch.ID, res.Err))
	}
	if res.Problem == nil {
		if need, err := w.needsCorroboration(ctx, tgt); err != nil {
			return jobs.CouldNotRun(fmt.Errorf("validating challenge %s: %w", ch.ID, err))
		} else if need {
			return w.askPerspectives(ctx, tgt, res, time.Since(started))
		}
	}
	w.metrics.validated(ch.Type, res.Problem, false)
	v := w.verdictFor(ctx, tgt, res)
	if err := jobs.Held(ctx); err != nil {
		return err // another worker may hold the job: its verdict, not this one's
	}
	w.log.InfoContext(ctx, "challenge validated", "challenge", ch.ID, "identifier", authz.Identifier.String(),
		"type", ch.Type, "status", v.Status, "problem", problemType(v.Error))
	err = w.st.validate.ChallengeVerdict(ctx, v)
	if errors.Is(err, store.ErrConflict) {
		return nil // another attempt recorded a verdict first
	}
	if err != nil {
		return jobs.CouldNotRun(fmt.Errorf("recording verdict for challenge %s: %w", ch.ID, err))
	}
	return nil
}

// validationRequest is what the validator checks for the challenge.
func (w *Worker) validationRequest(ctx context.Context, tgt *store.ChallengeAuthz) (validate.Request, error) {
	ch, authz := &tgt.Challenge, &tgt.Authz
	var err error
	req := validate.Request{
		Identifier:       authz.Identifier,
		Wildcard:         authz.Wildcard,
		Type:             ch.Type,
		Token:            ch.Token,
		KeyAuthorization: ch.Token + "." + tgt.Thumbprint,
		AccountURI:       w.accountURI(authz.AccountID),
	}
	if ch.Type == acme.ChallengeDNSPersist01 {
		// A record hashed with a key the account has since replaced still
		// names it (draft-ietf-acme-dns-persist-02 §4.2).
		if req.PriorThumbprints, err = w.st.validate.AccountPriorThumbprints(ctx, authz.AccountID); err != nil {
			return req, err
		}
	}
	return req, nil
}

// verdictFor is the verdict res makes, with its trail event.
func (w *Worker) verdictFor(ctx context.Context, tgt *store.ChallengeAuthz, res validate.Result) store.Verdict {
	ch, authz := &tgt.Challenge, &tgt.Authz
	valid := w.trailEvent(ctx, authz.AccountID, store.ActionValidationValid, ch.ID, fmt.Sprintf("%s of %s", ch.Type, authz.Identifier))
	v := store.Verdict{ChallengeID: ch.ID, Status: acme.StatusValid, ExpiresBy: res.ExpiresBy, Trail: &valid}
	if res.Problem != nil {
		p := *res.Problem
		p.Identifier = &authz.Identifier
		v.Status, v.Error = acme.StatusInvalid, &p
		ev := w.trailEvent(ctx, authz.AccountID, store.ActionValidationFailed, ch.ID,
			fmt.Sprintf("%s of %s: %s: %s", ch.Type, authz.Identifier, p.Type, p.Detail))
		v.Trail = &ev
	}
	if rec, err := json.Marshal(res.Record); err == nil {
		v.ValidationRecord = rec
	}
	return v
}

func problemType(p *acme.Problem) string {
	if p == nil {
		return ""
	}
	return string(p.Type)
}

// dialRules is the dial policy of cfg: policy.deny_ip_ranges, the opt-out
// of the built-in refusals and the CA's own listeners.
func dialRules(cfg Config) (validate.DialRules, error) {
	deny, err := policy.ParseIPRanges("policy.deny_ip_ranges", cfg.DenyIPRanges)
	if err != nil {
		return validate.DialRules{}, err
	}
	allow, err := policy.ParseIPRanges("challenge.allow_reserved_ranges", cfg.Challenge.AllowReservedRanges)
	if err != nil {
		return validate.DialRules{}, err
	}
	return validate.DialRules{Deny: deny, AllowReserved: allow, Listeners: cfg.Listeners}, nil
}
