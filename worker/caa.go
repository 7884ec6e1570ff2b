package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// caaRecheckAfter is how old an authorization's validation may be before
// issuance checks its CAA again. The CA/Browser Forum's Baseline
// Requirements (§3.2.2.8) allow 8 hours between the CAA check and
// issuance, and a valid authorization is reused for up to
// server.authz_lifetime_hours (30 days by default); Boulder rechecks after
// 7 hours, and so do we, leaving an hour for the order to be signed.
const caaRecheckAfter = 7 * time.Hour

// accountURI is the account's URL at the ACME API, as CAA accounturi
// parameters (RFC 8657) name it.
func (w *Worker) accountURI(id string) string { return w.baseURL + "/acme/acct/" + id }

// recheckCAA checks CAA again for every authorization of o validated more
// than caaRecheckAfter ago, all at once (the order's read, OrderToIssue,
// said there are some). It returns the first refusal in
// the order's position order (a caa or dns problem naming its identifier:
// a lookup that fails never permits issuance, RFC 8659 §3), nil when every
// one permits issuance, or a could-not-run error when the authorizations
// could not be read or a check could not run (this worker's resolvers are
// down, or ctx ended) and none refused: no issuance then either, but a
// retry rather than a verdict on the order.
func (w *Worker) recheckCAA(ctx context.Context, o *store.Order) (*acme.Problem, error) {
	stale, err := w.st.issue.StaleValidations(ctx, o.ID, caaRecheckAfter)
	if err != nil {
		return nil, jobs.CouldNotRun(fmt.Errorf("reading the validations of order %s: %w", o.ID, err))
	}
	if len(stale) == 0 {
		return nil, nil
	}
	accountURI := w.accountURI(o.AccountID)
	problems := make([]*acme.Problem, len(stale))
	errs := make([]error, len(stale))
	var wg sync.WaitGroup
	for i, v := range stale {
		wg.Go(func() {
			problems[i], errs[i] = w.validator.CheckCAA(ctx, v.Identifier, v.Wildcard, v.Method, accountURI)
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		// Stopping, or the job timed out: no refusal found is a verdict.
		return nil, jobs.CouldNotRun(fmt.Errorf("checking CAA again for order %s: %w", o.ID, err))
	}
	for i, p := range problems {
		if p != nil {
			id := stale[i].Identifier
			if stale[i].Wildcard {
				id.Value = "*." + id.Value
			}
			p.Identifier = &id
			p.Detail = fmt.Sprintf("CAA checked again at issuance, the authorization for %s having been validated at %s: %s",
				id.Value, stale[i].Validated.UTC().Format(time.RFC3339), p.Detail)
			w.log.InfoContext(ctx, "CAA rechecked at issuance refuses", "order", o.ID, "identifier", id.Value, "problem", p.Type)
			return p, nil
		}
	}
	if err := errors.Join(errs...); err != nil {
		// No refusal, but not every check ran: the order is not signed,
		// and the job is retried (abandoned after the last attempt).
		w.log.WarnContext(ctx, "CAA not rechecked at issuance: the check could not run; the job will be retried", "order", o.ID, "err", err)
		return nil, jobs.CouldNotRun(fmt.Errorf("checking CAA again for order %s: %w", o.ID, err))
	}
	return nil, nil
}
