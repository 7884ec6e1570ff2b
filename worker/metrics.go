package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/signer"
)

// metrics are the worker's own (docs/operations.md, "Metrics"); the job
// runner's are jobs.Metrics.
type metrics struct {
	signed      prometheus.Counter
	validations *prometheus.CounterVec
	signing     *prometheus.HistogramVec
	signErrors  *prometheus.CounterVec
}

func newMetrics() metrics {
	return metrics{
		signed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hallmark_worker_certificates_signed_total",
			Help: "Certificates signed and stored by this worker.",
		}),
		validations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hallmark_validations_total",
			Help: "Challenge validations, by method, result (valid, invalid, error: the check could not run) and ACME problem type.",
		}, []string{"method", "result", "problem"}),
		signing: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hallmark_signing_duration_seconds",
			Help:    "Time a backend took to issue a certificate (lint and sign, or the upstream's answer), by profile and backend.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"profile", "backend"}),
		signErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hallmark_signing_errors_total",
			Help: "Issuances a backend did not sign, by profile, backend and reason (unavailable: retried; refused: the order fails with the backend's problem; failed: serverInternal).",
		}, []string{"profile", "backend", "reason"}),
	}
}

// register adds the worker's metrics and its scrape-time collector to reg,
// with the series an alert reads as a rate exported at 0 from the start.
func (w *Worker) register(reg prometheus.Registerer) error {
	for name, m := range w.mounts {
		for _, reason := range []string{"unavailable", "refused", "failed"} {
			w.metrics.signErrors.WithLabelValues(name, m.profile.Backend, reason)
		}
	}
	for _, method := range []acme.ChallengeType{acme.ChallengeHTTP01, acme.ChallengeDNS01, acme.ChallengeTLSALPN01,
		acme.ChallengeDNSAccount01, acme.ChallengeDNSPersist01} {
		for _, result := range []string{"valid", "error"} {
			w.metrics.validations.WithLabelValues(string(method), result, "")
		}
	}
	for _, n := range w.quorum.Names {
		for _, result := range perspectiveResults {
			w.persp.answers.WithLabelValues(n, result)
		}
	}
	for _, c := range []prometheus.Collector{w.metrics.signed, w.metrics.validations, w.metrics.signing,
		w.metrics.signErrors, w.slots.deferred, stateCollector{w}, w.persp.answers, w.persp.latency} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("registering worker metrics: %w", err)
		}
	}
	return nil
}

// validated counts one validation's end.
func (m metrics) validated(method acme.ChallengeType, p *acme.Problem, couldNotRun bool) {
	switch {
	case couldNotRun:
		m.validations.WithLabelValues(string(method), "error", "").Inc()
	case p == nil:
		m.validations.WithLabelValues(string(method), "valid", "").Inc()
	default:
		m.validations.WithLabelValues(string(method), "invalid", problemLabel(p.Type)).Inc()
	}
}

// problemLabel is a problem type's last segment ("connection"), for the
// known types only, so the label's values stay bounded; others are "other".
func problemLabel(t acme.ProblemType) string {
	if t.Known() {
		return strings.TrimPrefix(string(t), "urn:ietf:params:acme:error:")
	}
	return "other"
}

// signedBy times one issuance and counts its failure, if any.
func (m metrics) signedBy(profile, backend string, took time.Duration, err error) {
	m.signing.WithLabelValues(profile, backend).Observe(took.Seconds())
	if err == nil {
		return
	}
	var ae *acme.Error
	reason := "failed"
	switch {
	case errors.Is(err, signer.ErrUnavailable):
		reason = "unavailable"
	case errors.As(err, &ae) && ae.Problem.Type != acme.ProblemServerInternal:
		reason = "refused"
	}
	m.signErrors.WithLabelValues(profile, backend, reason).Inc()
}

// stateCollector exports, at scrape time, what this worker mounts and the
// newest CRL of each issuer it signs for (one indexed read per issuer).
type stateCollector struct{ w *Worker }

var (
	descQueue = prometheus.NewDesc("hallmark_worker_queue_subscribed",
		"1 for each job queue this worker works (validate, maintenance, profile_<name>, crl_<issuer>).", []string{"queue"}, nil)
	descCRLThis = prometheus.NewDesc("hallmark_crl_this_update_timestamp_seconds",
		"thisUpdate of the issuer's newest stored CRL (its stalest shard's), as a Unix time; absent before the first.", []string{"issuer"}, nil)
	descCRLNext = prometheus.NewDesc("hallmark_crl_next_update_timestamp_seconds",
		"nextUpdate of the issuer's newest stored CRL (its stalest shard's), as a Unix time; absent before the first.", []string{"issuer"}, nil)
	descCRLUp = prometheus.NewDesc("hallmark_crl_read_up",
		"1 when the scrape read the issuer's newest CRLs (or found none), 0 when the read failed.", []string{"issuer"}, nil)
)

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descQueue, descCRLThis, descCRLNext, descCRLUp} {
		ch <- d
	}
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	for _, q := range c.w.Queues() {
		ch <- prometheus.MustNewConstMetric(descQueue, prometheus.GaugeValue, 1, q)
	}
	ids := c.w.issuerIDs()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, id := range ids {
		crls, err := c.w.st.crls.CRLShards(ctx, id)
		if err != nil {
			ch <- prometheus.MustNewConstMetric(descCRLUp, prometheus.GaugeValue, 0, id)
			continue
		}
		ch <- prometheus.MustNewConstMetric(descCRLUp, prometheus.GaugeValue, 1, id)
		if len(crls) == 0 {
			continue
		}
		// The stalest shard speaks for the issuer: the alerts fire when
		// any of its CRLs nears its nextUpdate.
		this, next := crls[0].ThisUpdate, crls[0].NextUpdate
		for _, crl := range crls[1:] {
			this, next = minTime(this, crl.ThisUpdate), minTime(next, crl.NextUpdate)
		}
		ch <- prometheus.MustNewConstMetric(descCRLThis, prometheus.GaugeValue, float64(this.Unix()), id)
		ch <- prometheus.MustNewConstMetric(descCRLNext, prometheus.GaugeValue, float64(next.Unix()), id)
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
