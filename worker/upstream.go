package worker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/store"
)

// RenewalInformer is a backend whose upstream CA says when its
// certificates should be renewed (RFC 9773): a relay, or a custom
// backend with a renewal_info hook. The worker fetches
// those windows and stores them; the frontend serves them from the store,
// since it never talks to a backend (design.md, tests/layering).
type RenewalInformer interface {
	// RenewalInfo is the upstream's word on one certificate (DER):
	// signer.ErrNoRenewalInfo when the upstream offers no ARI,
	// signer.ErrUnavailable when it could not be asked.
	RenewalInfo(ctx context.Context, der []byte) (*signer.RenewalInfo, error)
	// RenewalInfoPerRun bounds the certificates one job asks about; 0
	// when the backend is configured to give none (a custom backend
	// without a renewal_info hook).
	RenewalInfoPerRun() int
}

// upstreamRenewalEvery is how often each worker schedules the refresh of
// each relay it mounts. Each certificate is asked about only once its
// upstream's Retry-After has passed (store.UpstreamDue), so this is the
// delay before a certificate just due is asked, not how often the
// upstream is asked about it.
const upstreamRenewalEvery = 5 * time.Minute

// upstreamRenewals are the refresh jobs of the relays this worker mounts:
// one per backend (its issuer ID), on the queue of the first profile, by
// name, that relays to it.
func (w *Worker) upstreamRenewals() []jobs.UpstreamRenewalArgs {
	names := make([]string, 0, len(w.mounts))
	for n := range w.mounts {
		names = append(names, n)
	}
	sort.Strings(names)
	seen := map[string]bool{}
	var out []jobs.UpstreamRenewalArgs
	for _, n := range names {
		b := w.mounts[n].backend
		if ri, ok := b.(RenewalInformer); !ok || ri.RenewalInfoPerRun() <= 0 || seen[b.IssuerID()] {
			continue
		}
		seen[b.IssuerID()] = true
		out = append(out, jobs.UpstreamRenewalArgs{IssuerID: b.IssuerID(), Profile: n})
	}
	return out
}

// informer is the mounted backend of issuerID that has upstream renewal
// information; nil when this worker mounts none.
func (w *Worker) informer(issuerID string) RenewalInformer {
	for _, m := range w.mounts {
		if ri, ok := m.backend.(RenewalInformer); ok && ri.RenewalInfoPerRun() > 0 && m.backend.IssuerID() == issuerID {
			return ri
		}
	}
	return nil
}

// refreshUpstreamRenewals runs one upstream_renewal job: it asks the
// upstream about the relay's live certificates that are due, at most
// RenewalInfoPerRun of them, and stores each answer with when to ask
// again (the upstream's Retry-After). An upstream without ARI changes
// nothing; one that cannot be asked ends the run, and the next scheduled
// run tries again: the job itself is not retried, as nothing waits on it.
func (w *Worker) refreshUpstreamRenewals(ctx context.Context, job jobs.Job[jobs.UpstreamRenewalArgs]) error {
	id := job.Args.IssuerID
	ri := w.informer(id)
	if ri == nil {
		return jobs.CouldNotRun(fmt.Errorf("relay %s is not mounted on worker %s", id, w.id))
	}
	due, err := w.st.upstream.UpstreamDue(ctx, id, ri.RenewalInfoPerRun())
	if err != nil {
		return jobs.CouldNotRun(err)
	}
	if len(due) == 0 {
		return nil
	}
	now, err := w.st.upstream.Now(ctx)
	if err != nil {
		return jobs.CouldNotRun(fmt.Errorf("reading the database clock: %w", err))
	}
	started, asked := time.Now(), 0
	for _, d := range due {
		info, err := ri.RenewalInfo(ctx, d.DER)
		switch {
		case errors.Is(err, signer.ErrNoRenewalInfo):
			return nil // Hallmark's own windows stand
		case errors.Is(err, signer.ErrUnavailable):
			w.log.WarnContext(ctx, "the upstream's renewal information could not be read; the next run asks again", "issuer", id, "asked", asked, "err", err)
			return nil
		case err != nil:
			// This certificate cannot be asked about (no authority key
			// identifier): ask again later, so it does not hold a place
			// at the head of every run.
			w.log.WarnContext(ctx, "a relay certificate's upstream renewal information cannot be asked for", "issuer", id, "serial", d.Serial, "err", err)
			info = &signer.RenewalInfo{RetryAfter: 24 * time.Hour}
		}
		asked++
		at := now.Add(time.Since(started)) // the database clock, moved on by the run so far
		if err := w.st.upstream.UpstreamRecord(ctx, upstreamWindow(d.Serial, info, at)); err != nil {
			return jobs.CouldNotRun(err)
		}
	}
	w.log.InfoContext(ctx, "upstream renewal windows refreshed", "issuer", id, "certificates", asked)
	return nil
}

// upstreamWindow is the row for what the upstream said of serial at at.
func upstreamWindow(serial string, info *signer.RenewalInfo, at time.Time) store.UpstreamWindow {
	return store.UpstreamWindow{Serial: serial, Start: info.Start, End: info.End, ExplanationURL: info.ExplanationURL,
		CheckedAt: at, NextCheckAt: at.Add(info.RetryAfter)}
}
