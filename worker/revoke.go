package worker

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/store"
)

// revokeCert runs one signer_revoke job: it asks the profile's relay or
// custom backend to revoke the certificate and records the revocation in one
// transaction; River completes the job once this returns nil. The frontend's
// revokeCert is polling the certificate row meanwhile (protocol
// revokeRemote).
//
// A backend that could not be reached is retried with backoff: a revocation
// is never dropped. A backend that refuses (a client problem other than
// alreadyRevoked) has answered: the refusal is logged, audited and recorded
// as the job's output, where the request waiting on this job reads it and
// passes it on (revocation.Service.wait); the certificate stays unrevoked,
// and a later request queues a new job that asks the backend again.
func (w *Worker) revokeCert(ctx context.Context, job jobs.Job[jobs.SignerRevokeArgs]) error {
	args := job.Args
	m, ok := w.mounts[args.Profile]
	if !ok {
		return jobs.CouldNotRun(fmt.Errorf("profile %q is not mounted on worker %s", args.Profile, w.id))
	}
	c, err := w.st.revoke.CertificateBySerial(ctx, args.Serial)
	if errors.Is(err, store.ErrNotFound) {
		w.log.ErrorContext(ctx, "signer_revoke for a certificate that does not exist", "serial", args.Serial)
		return nil
	}
	if err != nil {
		return jobs.CouldNotRun(fmt.Errorf("loading certificate %s: %w", args.Serial, err))
	}
	if c.RevokedAt != nil {
		// The subject is the certificate: already revoked (a rescued job
		// whose worker died after recording it, or an operator), nothing to
		// do. A worker that died after the backend revoked but before
		// recording it leaves the certificate unrevoked here, so the backend
		// is asked again; its alreadyRevoked answer is handled below.
		return nil
	}
	ev := store.AuditEvent{Actor: "worker:" + w.id, Action: "revoke.backend", Subject: args.Serial,
		Detail: fmt.Sprintf("reason %d confirmed by the %s backend of profile %s", args.Reason, m.profile.Backend, args.Profile)}
	if !store.RemoteIssuer(c.IssuerID) {
		// A certificate Hallmark signed, queued here (by an older frontend,
		// or its profile now names a relay): the revocation row is the
		// revocation, and its issuer's CRL lists it. The upstream or hooks
		// never saw it and would refuse.
		ev.Detail = fmt.Sprintf("reason %d recorded for issuer %s's CRL", args.Reason, c.IssuerID)
		if _, err := w.st.revoke.Revoke(ctx, args.Serial, args.Reason, ev); err != nil && !errors.Is(err, store.ErrConflict) {
			return jobs.CouldNotRun(fmt.Errorf("recording the revocation of %s: %w", args.Serial, err))
		}
		return nil
	}
	if m.backend.IssuerID() != c.IssuerID {
		// The profile names another backend now than the one that issued
		// the certificate: only that one can revoke it.
		var ok bool
		if m, ok = w.mountOf(c.IssuerID); !ok {
			return jobs.CouldNotRun(fmt.Errorf("certificate %s was issued by %s, which profile %s no longer names and worker %s does not mount", args.Serial, c.IssuerID, args.Profile, w.id))
		}
		ev.Detail = fmt.Sprintf("reason %d confirmed by the %s backend of %s (queued for profile %s)", args.Reason, m.profile.Backend, c.IssuerID, args.Profile)
	}
	err = m.backend.Revoke(ctx, args.Serial, c.DER, args.Reason)
	var ae *acme.Error
	switch {
	case err == nil:
	case errors.As(err, &ae) && ae.Problem.Type == acme.ProblemAlreadyRevoked:
		ev.Detail += " (the backend says it was already revoked)"
	case errors.As(err, &ae) && ae.Problem.Type != acme.ProblemServerInternal:
		w.log.WarnContext(ctx, "the backend refused the revocation", "serial", args.Serial, "profile", args.Profile, "problem", ae.Problem.Type, "detail", ae.Problem.Detail)
		ev.Action, ev.Detail = "revoke.refused", fmt.Sprintf("the %s backend refused: %s", m.profile.Backend, ae.Problem.Detail)
		if err := w.st.revoke.AuditRecord(ctx, ev); err != nil {
			return jobs.CouldNotRun(fmt.Errorf("recording the refused revocation of %s: %w", args.Serial, err))
		}
		w.recordRefusal(ctx, job, ae.Problem)
		return nil
	case errors.Is(err, signer.ErrUnavailable):
		return jobs.CouldNotRun(fmt.Errorf("revoking %s: %w", args.Serial, err))
	default:
		// A revocation must not be dropped: anything else is retried too,
		// and lands in the job's attempt log.
		return jobs.CouldNotRun(fmt.Errorf("revoking %s: %w", args.Serial, err))
	}
	err = w.st.revoke.RevokeRecorded(ctx, args.Serial, args.Reason, ev)
	if err != nil && !errors.Is(err, store.ErrConflict) {
		return jobs.CouldNotRun(fmt.Errorf("recording the revocation of %s: %w", args.Serial, err))
	}
	w.log.InfoContext(ctx, "certificate revoked by its backend", "serial", args.Serial, "profile", args.Profile, "reason", args.Reason)
	return nil
}

// recordRefusal keeps the backend's refusal as the job's output, for the
// request waiting on it. Failing to is logged, not retried: asking the
// backend again would give the same answer, and the audit event has it; the
// waiting client sees 503 and asks again.
func (w *Worker) recordRefusal(ctx context.Context, job jobs.Job[jobs.SignerRevokeArgs], p acme.Problem) {
	refused := acme.Problem{Type: p.Type, Detail: p.Detail}
	if err := jobs.RecordOutput(ctx, jobs.SignerRevokeOutput{Refused: &refused}); err != nil {
		w.log.ErrorContext(ctx, "recording the backend's refusal as the job's output; the waiting client is not told", "job_id", job.ID, "serial", job.Args.Serial, "error", err)
	}
}

// mountOf is a mounted profile whose relay or custom backend is issuerID's.
func (w *Worker) mountOf(issuerID string) (mount, bool) {
	names := make([]string, 0, len(w.mounts))
	for n := range w.mounts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if m := w.mounts[n]; m.issuer == nil && m.backend.IssuerID() == issuerID {
			return m, true
		}
	}
	return mount{}, false
}
