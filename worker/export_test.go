package worker

import (
	"context"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
)

// RefreshUpstreamRenewals runs one upstream_renewal job's handler, as
// River would: tests count the upstream requests of each run.
func (w *Worker) RefreshUpstreamRenewals(ctx context.Context, a jobs.UpstreamRenewalArgs) error {
	return w.refreshUpstreamRenewals(ctx, jobs.Job[jobs.UpstreamRenewalArgs]{Kind: jobs.KindUpstreamRenewal, Attempt: 1, Args: a})
}

// UpstreamRenewals are the refresh jobs this worker schedules.
func (w *Worker) UpstreamRenewals() []jobs.UpstreamRenewalArgs { return w.upstreamRenewals() }

// CRLNumber is crlNumber.
func CRLNumber(next int64, thisUpdate time.Time) int64 { return crlNumber(next, thisUpdate) }
