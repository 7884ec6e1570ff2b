package worker

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/origin"
	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/store"
)

// issueOrder runs one signer_issue job: build, lint and sign the certificate
// for a processing order, then store it and move the order to valid (or
// invalid when the backend rejects it) in one transaction; River completes
// the job once this returns nil.
func (w *Worker) issueOrder(ctx context.Context, job jobs.Job[jobs.SignerIssueArgs]) error {
	args := job.Args
	mount, ok := w.mounts[args.Profile]
	if !ok {
		// Only reachable if this worker subscribed to a queue it does not
		// serve; leave the job for a worker that mounts the profile.
		return jobs.CouldNotRun(fmt.Errorf("profile %q is not mounted on worker %s", args.Profile, w.id))
	}
	ti, err := w.st.issue.OrderToIssue(ctx, args.OrderID, caaRecheckAfter)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("order %s does not exist: %w", args.OrderID, err)
	}
	if err != nil {
		return jobs.CouldNotRun(fmt.Errorf("loading order %s: %w", args.OrderID, err))
	}
	o := ti.Order
	if o.Status != acme.StatusProcessing {
		// Already finished (a rescued job whose worker died after the
		// verdict committed) or abandoned: signing again would issue a
		// second certificate for the order. What an earlier attempt
		// signed and could not store is recorded, revoked: the order did
		// not take it.
		if v, ok := w.unstored.LoadAndDelete(o.ID); ok {
			return w.undelivered(ctx, o, args.Profile, v.(unstoredCert), "is "+string(o.Status)+", no longer processing", undeliveredReason)
		}
		return nil
	}
	if done, err := w.beforeSigning(ctx, ti, args.Profile); done {
		return err
	}
	return w.sign(ctx, mount, args.Profile, o)
}

// refuseOrder fails o for p, before any key operation for it; a
// certificate an earlier attempt signed before what p says was seen is
// recorded revoked (why: what happened to the order).
func (w *Worker) refuseOrder(ctx context.Context, o *store.Order, profile string, p acme.Problem, why string) error {
	if err := w.failOrder(ctx, o, p); err != nil {
		return err
	}
	if v, ok := w.unstored.LoadAndDelete(o.ID); ok {
		return w.undelivered(ctx, o, profile, v.(unstoredCert), why, undeliveredReasonFor(p))
	}
	return nil
}

// beforeSigning settles a processing order that must not be signed now:
// its account, an authorization or its key went bad since the finalize,
// an earlier attempt's certificate waits to be stored, or a stale CAA
// check now refuses. done is false when the order is to be signed.
func (w *Worker) beforeSigning(ctx context.Context, ti *store.ToIssue, profile string) (done bool, err error) {
	o := ti.Order
	if ti.Lapsed != nil {
		// Its account or an authorization stopped being valid since the
		// finalize, and the deactivation did not move the order (on
		// PostgreSQL it may not have seen an order newOrder committed
		// during it).
		return true, w.refuseOrder(ctx, o, profile, *ti.Lapsed, "lost its account or an authorization")
	}
	if m := w.mounts[profile]; m.profile.Perspectives && ti.Uncorroborated != "" {
		return true, w.refuseOrder(ctx, o, profile, uncorroborated(ti.Uncorroborated, profile), "had an authorization network perspectives did not corroborate")
	}
	if ti.Blocked != nil {
		// The CSR's key was reported compromised since the finalize
		// (CA/B Forum BR §6.1.1.3).
		return true, w.refuseOrder(ctx, o, profile, *ti.Blocked, "had its key reported compromised")
	}
	if v, ok := w.unstored.LoadAndDelete(o.ID); ok {
		// An earlier attempt signed and could not store: store that
		// certificate, which may already exist upstream (a relay backend),
		// instead of signing another.
		return true, w.storeIssued(ctx, o, profile, v.(unstoredCert))
	}
	if ti.Stale {
		if p, err := w.recheckCAA(ctx, o); err != nil {
			return true, err
		} else if p != nil {
			return true, w.failOrder(ctx, o, *p)
		}
	}
	return false, nil
}

// sign has the profile's backend sign o's certificate and stores it; the
// backend's rejection or a signing error fails the order, an unavailable
// backend leaves the job to retry.
func (w *Worker) sign(ctx context.Context, m mount, profile string, o *store.Order) error {
	csr, err := x509.ParseCertificateRequest(o.CSR)
	if err != nil {
		return w.failOrder(ctx, o, acme.Problem{Type: acme.ProblemBadCSR, Detail: "the stored CSR does not parse: " + err.Error()})
	}
	backend, err := w.backendFor(ctx, m, profile, csr.PublicKey)
	if err != nil {
		return err
	}
	issuerID := backend.IssuerID()
	shard := crlShardOf(o.ID, w.crlShardsOf(issuerID))
	signStart := time.Now()
	issued, err := backend.Issue(ctx, signer.Request{
		Profile:     m.profile,
		ProfileName: profile,
		OrderID:     o.ID,
		Names:       o.Identifiers,
		PublicKey:   csr.PublicKey,
		NotBefore:   o.NotBefore,
		NotAfter:    o.NotAfter,
		IssuerURL:   w.urlBase + "/issuer/" + issuerID,
		CRLURL:      w.crlURL(issuerID, shard),
	}, csr)
	w.metrics.signedBy(profile, m.profile.Backend, time.Since(signStart), err)
	if err != nil {
		var ae *acme.Error
		if errors.As(err, &ae) && ae.Problem.Type != acme.ProblemServerInternal {
			// The backend's own rejection (bad key, bad CSR) is a verdict.
			return w.failOrder(ctx, o, ae.Problem)
		}
		if errors.Is(err, signer.ErrUnavailable) || ctx.Err() != nil {
			// The token is gone or hung, the upstream unreachable, the hook
			// unavailable: deferred until the order expires, not failed.
			return jobs.Unavailable(fmt.Errorf("signing order %s: %w", o.ID, err), o.Expires)
		}
		// A lint failure or another signing error: terminal, logged with the cause.
		w.log.ErrorContext(ctx, "signing failed", "order", o.ID, "err", err)
		return w.failOrder(ctx, o, acme.Problem{Type: acme.ProblemServerInternal, Detail: "the CA could not issue this certificate; the operator has the details in the worker log"})
	}
	// The certificate's key is the CSR's: every backend signs it or checks
	// it (the local signers certify csr.PublicKey; the relay and custom
	// backends refuse a leaf of another key). Its hash is the one the
	// finalize stored on the order (store.KeyHash of the raw SPKI), with
	// no second parse of the certificate for it.
	return w.storeIssued(ctx, o, profile, unstoredCert{issued, issuerID, store.KeyHash(csr.RawSubjectPublicKeyInfo), shard})
}

// failOrder fails o with p, recording it on the issuance trail in the
// same transaction. An order no longer processing is left as it is.
func (w *Worker) failOrder(ctx context.Context, o *store.Order, p acme.Problem) error {
	if err := jobs.Held(ctx); err != nil {
		return err // another worker may hold the job: its verdict, not this one's
	}
	w.log.WarnContext(ctx, "order failed", "order", o.ID, "problem", p.Type, "detail", p.Detail)
	ev := w.trailEvent(ctx, o.AccountID, store.ActionOrderInvalid, o.ID, string(p.Type)+": "+p.Detail)
	err := w.st.issue.OrderFailTrailed(ctx, o.ID, p, ev)
	if err != nil && !errors.Is(err, store.ErrConflict) {
		return jobs.CouldNotRun(fmt.Errorf("recording failure of order %s: %w", o.ID, err))
	}
	return nil
}

// unstoredCert is a signed certificate, its issuer and its key's hash,
// kept until stored.
type unstoredCert struct {
	issued   *signer.Issued
	issuerID string
	keyHash  []byte
	crlShard int // the CRL shard its distribution point names
}

// storeIssued stores c as o's certificate and moves o to valid. When the
// store fails, c is kept for the job's retry on this worker.
func (w *Worker) storeIssued(ctx context.Context, o *store.Order, profile string, c unstoredCert) error {
	row := certRow(o, profile, c)
	if err := jobs.Held(ctx); err != nil {
		// Another worker may hold the job now and sign its own: this
		// certificate is recorded revoked, never delivered.
		if uerr := w.undelivered(context.WithoutCancel(ctx), o, profile, c, "was taken by another worker after this one's heartbeat lapsed", undeliveredReason); uerr != nil {
			return errors.Join(err, uerr)
		}
		return err
	}
	ev := w.trailEvent(ctx, o.AccountID, store.ActionCertificateIssued, row.Serial,
		fmt.Sprintf("order %s, profile %s, names %s, issuer %s", o.ID, profile, strings.Join(row.Names, ", "), c.issuerID))
	err := w.st.issue.OrderIssued(ctx, store.Issued{OrderID: o.ID, Certificate: row, Trail: &ev})
	if errors.Is(err, store.ErrUnauthorized) {
		// Its account or an authorization stopped being valid while it
		// was signed, and the order is still processing: the swap stored
		// nothing; the order fails with the reason OrderToIssue reads.
		p := acme.Problem{Type: acme.ProblemUnauthorized, Detail: "the account or an authorization of this order stopped being valid while the certificate was issued, so it was not; create a new order"}
		why := "lost its account or an authorization"
		if ti, err := w.st.issue.OrderToIssue(ctx, o.ID, caaRecheckAfter); err == nil && ti.Lapsed != nil {
			p = *ti.Lapsed
		} else if err == nil && ti.Blocked != nil {
			p, why = *ti.Blocked, "had its key reported compromised"
		}
		// c is recorded first, so an order a client sees invalid has its
		// certificate accounted for; a retry fails the order (issueOrder).
		if err := w.undelivered(ctx, o, profile, c, why, undeliveredReasonFor(p)); err != nil {
			return err
		}
		return w.failOrder(ctx, o, p)
	}
	if errors.Is(err, store.ErrConflict) {
		// The order left processing while it was signed: its account or
		// an authorization was deactivated, or an operator abandoned it.
		return w.undelivered(ctx, o, profile, c, "left processing", undeliveredReason)
	}
	if err != nil {
		w.unstored.Store(o.ID, c)
		w.log.WarnContext(ctx, "certificate signed but not stored; the job's retry stores it", "order", o.ID, "serial", c.issued.SerialHex, "err", err)
		return jobs.CouldNotRun(fmt.Errorf("storing certificate %s for order %s: %w", c.issued.SerialHex, o.ID, err))
	}
	w.metrics.signed.Inc()
	w.log.InfoContext(ctx, "certificate issued", "order", o.ID, "serial", c.issued.SerialHex, "profile", profile)
	return nil
}

// certRow is the row of c, signed for o under profile.
func certRow(o *store.Order, profile string, c unstoredCert) store.Certificate {
	names := make([]string, len(o.Identifiers))
	for i, id := range o.Identifiers {
		names[i] = id.Value
	}
	return store.Certificate{
		// By which a key reported compromised finds this certificate
		// (store.BlockedKeys).
		SPKIHash:  c.keyHash,
		Serial:    c.issued.SerialHex,
		OrderID:   o.ID,
		AccountID: o.AccountID,
		IssuerID:  c.issuerID,
		Profile:   profile,
		DER:       c.issued.DER,
		ChainPEM:  c.issued.ChainPEM,
		Names:     names,
		NotBefore: c.issued.NotBefore,
		NotAfter:  c.issued.NotAfter,
		CRLShard:  c.crlShard,
	}
}

// undeliveredReason is the RFC 5280 CRLReason an undelivered certificate
// is revoked with: cessationOfOperation, "no longer needed" — nobody holds
// it, and nothing about its key or its subscriber is suspect; unless its
// key was reported compromised while it was signed (undeliveredReasonFor).
const undeliveredReason = 5

// undeliveredReasonFor is the reason an undelivered certificate is revoked
// with when its order failed for p: keyCompromise for a key blocked while
// it was signed (badPublicKey), else undeliveredReason.
func undeliveredReasonFor(p acme.Problem) int {
	if p.Type == acme.ProblemBadPublicKey {
		return store.ReasonKeyCompromise
	}
	return undeliveredReason
}

// reasonName is the RFC 5280 name of the reasons an undelivered
// certificate is revoked with.
func reasonName(r int) string {
	if r == store.ReasonKeyCompromise {
		return "keyCompromise"
	}
	return "cessationOfOperation"
}

// undelivered records c, signed for o when o could no longer take it (why
// says what happened to o), as revoked (store.UndeliveredRecord): the CA's
// key signed it, so the CA keeps it and lists it in its CRL, or asks the
// relay or custom backend that issued it to revoke it, rather than leave a
// signature nobody can account for. When the store fails, c is kept for the
// job's retry on this worker, which records it (issueOrder).
func (w *Worker) undelivered(ctx context.Context, o *store.Order, profile string, c unstoredCert, why string, reason int) error {
	serial := c.issued.SerialHex
	revoked := fmt.Sprintf("revoked with reason %d (%s)", reason, reasonName(reason))
	if store.RemoteIssuer(c.issuerID) {
		revoked = fmt.Sprintf("queued for its backend to revoke with reason %d (%s)", reason, reasonName(reason))
	}
	ev := store.AuditEvent{Actor: "worker:" + w.id, Action: "certificate.undelivered", Subject: serial,
		Detail: fmt.Sprintf("signed by %s for order %s, which %s while it was signed; not delivered, %s", c.issuerID, o.ID, why, revoked),
		Origin: origin.Of(ctx)}
	err := w.st.issue.UndeliveredRecord(ctx, certRow(o, profile, c), reason, ev)
	switch {
	case errors.Is(err, store.ErrConflict):
		// Stored already: an earlier attempt's store committed after all
		// (its order valid with it), or an earlier record of it did.
		return nil
	case err != nil:
		w.unstored.Store(o.ID, c)
		w.log.WarnContext(ctx, "certificate signed for an order that could no longer take it, and not recorded yet; the job's retry records it", "order", o.ID, "serial", serial, "err", err)
		return jobs.CouldNotRun(fmt.Errorf("recording undelivered certificate %s of order %s: %w", serial, o.ID, err))
	}
	w.log.WarnContext(ctx, "certificate signed for an order that could no longer take it; recorded as revoked, not delivered", "order", o.ID, "serial", serial, "order_now", why, "issuer", c.issuerID)
	return nil
}

// uncorroborated is the problem failing an order of profile, which
// requires network perspectives (BR §3.2.2.9), for its authorization
// authzID validated without them.
func uncorroborated(authzID, profile string) acme.Problem {
	return acme.Problem{Type: acme.ProblemUnauthorized, Detail: fmt.Sprintf(
		"authorization %s was validated without network perspectives, which profile %q requires, so the certificate was not issued; "+
			"deactivate the authorization and order again (the CA needs [challenge.perspectives] names set)", authzID, profile)}
}
