package worker

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
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
	o, err := w.store.OrderByID(ctx, args.OrderID)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("order %s does not exist: %w", args.OrderID, err)
	}
	if err != nil {
		return jobs.CouldNotRun(fmt.Errorf("loading order %s: %w", args.OrderID, err))
	}
	if o.Status != acme.StatusProcessing {
		// Already finished (a rescued job whose worker died after the
		// verdict committed) or abandoned: signing again would issue a
		// second certificate for the order.
		return nil
	}
	fail := func(p acme.Problem) error {
		w.log.Warn("order failed", "order", o.ID, "problem", p.Type, "detail", p.Detail)
		err := w.store.OrderFail(ctx, o.ID, p)
		if err != nil && !errors.Is(err, store.ErrConflict) {
			return jobs.CouldNotRun(fmt.Errorf("recording failure of order %s: %w", o.ID, err))
		}
		return nil
	}
	if p, err := w.recheckCAA(ctx, o); err != nil {
		return err
	} else if p != nil {
		return fail(*p)
	}
	csr, err := x509.ParseCertificateRequest(o.CSR)
	if err != nil {
		return fail(acme.Problem{Type: acme.ProblemBadCSR, Detail: "the stored CSR does not parse: " + err.Error()})
	}
	issuerID := mount.backend.IssuerID()
	issued, err := mount.backend.Issue(ctx, signer.Request{
		Profile:     mount.profile,
		ProfileName: args.Profile,
		Names:       o.Identifiers,
		PublicKey:   csr.PublicKey,
		NotBefore:   o.NotBefore,
		NotAfter:    o.NotAfter,
		IssuerURL:   w.urlBase + "/issuer/" + issuerID,
		CRLURL:      w.urlBase + "/crl/" + issuerID,
	}, csr)
	if err != nil {
		var ae *acme.Error
		if errors.As(err, &ae) && ae.Problem.Type != acme.ProblemServerInternal {
			// The backend's own rejection (bad key, bad CSR) is a verdict.
			return fail(ae.Problem)
		}
		if errors.Is(err, signer.ErrUnavailable) {
			return jobs.CouldNotRun(fmt.Errorf("signing order %s: %w", o.ID, err))
		}
		// A lint failure or another signing error: terminal, logged with the cause.
		w.log.Error("signing failed", "order", o.ID, "err", err)
		return fail(acme.Problem{Type: acme.ProblemServerInternal, Detail: "the CA could not issue this certificate; the operator has the details in the worker log"})
	}
	names := make([]string, len(o.Identifiers))
	for i, id := range o.Identifiers {
		names[i] = id.Value
	}
	err = w.store.OrderIssued(ctx, store.Issued{OrderID: o.ID, Certificate: store.Certificate{
		Serial:    issued.SerialHex,
		OrderID:   o.ID,
		AccountID: o.AccountID,
		IssuerID:  issuerID,
		Profile:   args.Profile,
		DER:       issued.DER,
		ChainPEM:  issued.ChainPEM,
		Names:     names,
		NotBefore: issued.NotBefore,
		NotAfter:  issued.NotAfter,
	}})
	if errors.Is(err, store.ErrConflict) {
		return nil
	}
	if err != nil {
		return jobs.CouldNotRun(fmt.Errorf("storing certificate for order %s: %w", o.ID, err))
	}
	w.signed.Inc()
	w.log.Info("certificate issued", "order", o.ID, "serial", issued.SerialHex, "profile", args.Profile)
	return nil
}
