package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// The peers every figure is set beside, by the prefix of their rows' labels.
var peers = []string{"pebble", "step-ca"}

// references picks, for each peer and concurrency, the run every figure
// there is compared with: its best completed run, or, when every run
// stalled (see --stall, --pebble-attempts), its best rate until a stall. A
// rate until a stall is measured over fewer issuances, some only the first
// few, so a completed run is the better reference even when slower. A run
// that failed is no reference.
func references(rs []*result) map[string]map[int]*result {
	better := func(r, than *result) bool {
		switch {
		case than == nil:
			return true
		case r.Stalled != than.Stalled:
			return !r.Stalled
		default:
			return r.RatePerSec() > than.RatePerSec()
		}
	}
	refs := map[string]map[int]*result{}
	for _, p := range peers {
		refs[p] = map[int]*result{}
	}
	for _, r := range rs {
		for _, p := range peers {
			if r.Failed == "" && strings.HasPrefix(r.Label, p) && better(r, refs[p][r.Spec.Concurrency]) {
				refs[p][r.Spec.Concurrency] = r
			}
		}
	}
	return refs
}

// printTable is the summary of every run, each figure beside Pebble's and
// step-ca's at the same concurrency when they ran (references).
func printTable(w io.Writer, rs []*result) {
	refs := references(rs)
	fmt.Fprintln(w, "\n| target | c | n ok | certs/s | vs Pebble | vs step-ca | total p50/p99 ms | newOrder p50 | chall→valid p50 | finalize→valid p50 | download p50 | server CPU ms/cert | requests/cert | peak RSS MiB | errors |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		if r.Failed != "" {
			fmt.Fprintf(w, "| %s | %d | 0 | FAILED: %.100s |%s\n", r.Label, r.Spec.Concurrency,
				strings.Join(strings.Fields(r.Failed), " "), strings.Repeat(" — |", 11))
			continue
		}
		ratio := func(peer string) string {
			if p := refs[peer][r.Spec.Concurrency]; p != nil && p.RatePerSec() > 0 {
				return fmt.Sprintf("%.2f×", r.RatePerSec()/p.RatePerSec())
			}
			return "—"
		}
		rate := fmt.Sprintf("%.1f", r.RatePerSec())
		if r.Stalled {
			rate += " until it stalled"
		}
		var rss int64
		for _, v := range r.PeakRSSKiB {
			rss += v
		}
		errs := 0
		for _, v := range r.Errors {
			errs += v
		}
		p50 := func(s string) string { return ms(percentile(r.Steps[s], 0.5)) }
		reqs := 0.0
		if r.OK > 0 {
			reqs = float64(r.Requests) / float64(r.OK)
		}
		fmt.Fprintf(w, "| %s | %d | %d | %s | %s | %s | %s / %s | %s | %s | %s | %s | %.2f | %.1f | %.0f | %d |\n",
			r.Label, r.Spec.Concurrency, r.OK, rate, ratio("pebble"), ratio("step-ca"),
			p50(stepTotal), ms(percentile(r.Steps[stepTotal], 0.99)), p50(stepNewOrder), p50(stepChallenge), p50(stepFinalize), p50(stepDownload),
			float64(r.CPUPerCert())/float64(time.Millisecond), reqs, float64(rss)/1024, errs)
	}
}
