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

// AccountSlots is accountSlots, for tests of its cap and pacing.
type AccountSlots struct{ a *accountSlots }

func NewAccountSlots(share float64, slots int) AccountSlots {
	return AccountSlots{newAccountSlots(share, slots)}
}

func (s AccountSlots) Take(account string, now time.Time) (time.Duration, bool) {
	return s.a.take(account, now)
}

func (s AccountSlots) Give(account string, started, now time.Time) { s.a.give(account, started, now) }
