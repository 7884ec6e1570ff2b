package protocol

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// metrics are the frontend's request metrics (registerMetrics).
type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	rejected prometheus.Counter
	inFlight prometheus.Gauge
	problems *prometheus.CounterVec // by problem type (badNonce, rateLimited, ...)
	redeemed prometheus.Counter     // nonces consumed by a request that went on
	access   *prometheus.CounterVec
	// verdictWaiting counts the requests waiting for a verdict (holding
	// no permit); verdictWaits how their waits ended.
	verdictWaiting prometheus.Gauge
	verdictWaits   *prometheus.CounterVec
}

// registerMetrics registers the request metrics with opts.Registry (by
// default a registry of the server's own) and chooses what /metrics serves
// (Options.Gatherer).
func (s *Server) registerMetrics(opts Options) error {
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	if s.gather = opts.Gatherer; s.gather == nil {
		s.gather = prometheus.DefaultGatherer
		if g, ok := reg.(prometheus.Gatherer); ok {
			s.gather = g
		}
	}
	s.metrics = metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hallmark_frontend_requests_total",
			Help: "ACME requests answered, by endpoint and HTTP status.",
		}, []string{"endpoint", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hallmark_frontend_request_duration_seconds",
			Help:    "Time to answer an ACME request, by endpoint.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"endpoint"}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hallmark_frontend_admission_rejected_total",
			Help: "Requests answered 503 because server.max_concurrent_requests were already in handlers.",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hallmark_frontend_requests_in_flight",
			Help: "Requests holding an admission permit.",
		}),
		problems: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hallmark_frontend_problems_total",
			Help: "Problem documents answered, by RFC 8555 type (badNonce, rateLimited, serverInternal, ...; other for none of them).",
		}, []string{"problem"}),
		redeemed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hallmark_frontend_nonces_redeemed_total",
			Help: "Nonces consumed by a signed request that went on past the nonce check.",
		}),
		access: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hallmark_frontend_access_refusals_total",
			Help: "Requests the access policy refused (deny), could not decide (unavailable: 503), or in mode warn would have (would_deny, would_unavailable).",
		}, []string{"verdict"}),
		verdictWaiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hallmark_frontend_verdict_waiting",
			Help: "Requests waiting for a worker's verdict (server.verdict_wait_ms), holding no admission permit.",
		}),
		verdictWaits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hallmark_frontend_verdict_waits_total",
			Help: "Waits for a verdict, by how they ended: verdict (answered with it), timeout (answered processing), busy (woken with no admission permit free to read it: answered processing).",
		}, []string{"outcome"}),
	}
	for _, t := range []acme.ProblemType{acme.ProblemBadNonce, acme.ProblemRateLimited, acme.ProblemServerInternal} {
		s.metrics.problems.WithLabelValues(problemLabel(t)) // at 0 from the start, for rates
	}
	for _, o := range []string{"verdict", "timeout", "busy", "error"} {
		s.metrics.verdictWaits.WithLabelValues(o) // at 0 from the start, for rates
	}
	for _, c := range []prometheus.Collector{s.metrics.requests, s.metrics.latency, s.metrics.rejected, s.metrics.inFlight,
		s.metrics.problems, s.metrics.redeemed, s.metrics.access, s.metrics.verdictWaiting, s.metrics.verdictWaits} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("registering metrics: %w", err)
		}
	}
	return nil
}

// statusWriter remembers the status for the metrics.
type statusWriter struct {
	http.ResponseWriter
	status int
}

// problemLabel is a problem type's last segment ("badNonce"), for the
// known types only, so the label's values stay bounded.
func problemLabel(t acme.ProblemType) string {
	if t.Known() {
		return strings.TrimPrefix(string(t), "urn:ietf:params:acme:error:")
	}
	return "other"
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// instrument wraps every ACME endpoint: metrics, the headers every response
// carries (Replay-Nonce, Link rel="index"), the admission permit and the
// deadline when admit is set, and rendering a returned error as a problem.
func (s *Server) instrument(name string, admit bool, h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		start := time.Now()
		w := &statusWriter{ResponseWriter: rw}
		defer func() {
			status := w.status
			if status == 0 {
				status = http.StatusOK
			}
			took := time.Since(start)
			s.metrics.requests.WithLabelValues(name, strconv.Itoa(status)).Inc()
			s.metrics.latency.WithLabelValues(name).Observe(took.Seconds())
			// A stable event name (docs/operations.md); its request_id
			// comes from the context (origin.LogHandler).
			s.log.LogAttrs(r.Context(), slog.LevelInfo, "request served", slog.String("route", name),
				slog.String("method", r.Method), slog.Int("status", status), slog.Duration("duration", took))
		}()
		// RFC 8555 §6.5: every response to a POST carries a Replay-Nonce,
		// error responses too; we put one on every ACME response so a
		// client never needs an extra newNonce round trip. Issue writes
		// nothing to the database.
		if name != "crl" {
			w.Header().Set("Replay-Nonce", s.nonces.Issue())
			w.Header().Set("Cache-Control", "no-store")
			if name != "directory" {
				// RFC 8555 §7.1: "index" link on every resource but the directory.
				w.Header().Add("Link", link(s.base+pathDirectory, "index"))
			}
		}
		if admit {
			// At most max_concurrent_requests in handlers; beyond that the
			// answer is an immediate 503, never a queue that grows without
			// bound while clients time out.
			adm := &admission{s: s}
			if !adm.take() {
				s.metrics.rejected.Inc()
				s.problem(w, r, acme.Unavailable(s.retry, "the server is busy; retry in %d seconds", int(s.retry/time.Second)))
				return
			}
			defer adm.release()
			ctx, cancel := context.WithTimeout(context.WithValue(r.Context(), admissionKey{}, adm), s.timeout)
			defer cancel()
			r = r.WithContext(ctx)
			// The deadline covers reading the body too: a client that
			// trickles its body does not hold a permit past it.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.timeout))
		}
		if !store.Storable(r.URL.Path) {
			// No URL of ours has a NUL or invalid UTF-8 in it, and
			// PostgreSQL refuses such text as a parameter: answered here,
			// it never reaches the store as a read that fails with 500.
			s.problem(w, r, malformedAs(http.StatusNotFound, "there is no resource at %q", r.URL.Path))
			return
		}
		if err := h(w, r); err != nil {
			var ae *acme.Error
			if name != "crl" && errors.As(err, &ae) && ae.Problem.Type == acme.ProblemBadNonce {
				// The nonce above was minted before the refusal, which may
				// have taught the service a new epoch (protocol/nonce):
				// the retry the client makes with this one must succeed.
				w.Header().Set("Replay-Nonce", s.nonces.Issue())
			}
			s.problem(w, r, err)
		}
	})
}
