package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/access"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// problem is the one renderer of errors (RFC 8555 §6.7, RFC 7807): an
// *acme.Error renders its Problem with the status from acme's one table and
// its Retry-After; a database outage or a deadline that passed renders 503
// with Retry-After (unavailable); anything else renders serverInternal
// with a fixed detail and is logged with its cause. The Replay-Nonce and
// Link rel="index" headers were set by instrument before the handler ran.
func (s *Server) problem(w http.ResponseWriter, r *http.Request, err error) {
	ae := s.unavailable(r, err)
	if ae == nil {
		ae = acme.AsError(err)
	}
	p := ae.Problem
	s.metrics.problems.WithLabelValues(problemLabel(p.Type)).Inc()
	status := p.HTTPStatus()
	p.Status = status
	switch {
	case errors.Is(err, store.ErrUnavailable):
		if log, quiet := s.outages.note(time.Now()); log {
			s.log.WarnContext(r.Context(), "acme request refused: the database is unavailable", "method", r.Method, "path", r.URL.Path,
				"status", status, "refused_since_last_line", quiet, "err", ae.Cause)
		}
	case errors.Is(err, access.ErrUnknown):
		if log, quiet := s.accessOutages.note(time.Now()); log {
			s.log.Warn("acme request refused: the access policy could not decide", "method", r.Method, "path", r.URL.Path,
				"status", status, "refused_since_last_line", quiet, "err", ae.Cause)
		}
	case p.Type == acme.ProblemServerInternal && ae.Cause != nil:
		s.log.ErrorContext(r.Context(), "acme request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", ae.Cause)
	default:
		s.log.DebugContext(r.Context(), "acme request refused", "method", r.Method, "path", r.URL.Path, "type", p.Type, "detail", p.Detail)
	}
	h := w.Header()
	if ae.RetryAfter > 0 {
		h.Set("Retry-After", retryAfter(ae.RetryAfter))
	}
	h.Set("Content-Type", "application/problem+json")
	// Every problem points at the directory, even one from the directory
	// URL itself (a wrong method), so a lost client can start over.
	if idx := link(s.base+pathDirectory, "index"); !slices.Contains(h.Values("Link"), idx) {
		h.Add("Link", idx)
	}
	h.Del("Location")
	var wl withLocation
	if errors.As(err, &wl) {
		h.Set("Location", wl.url)
	}
	body, merr := json.Marshal(p)
	if merr != nil {
		body = []byte(`{"type":"urn:ietf:params:acme:error:serverInternal","detail":"the server hit an internal error; try again later","status":500}`)
		status = http.StatusInternalServerError
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// storeErr names what a failed store call was doing, for the log. The
// renderer decides what the client sees (problem): a database outage or a
// deadline that ran out is a 503 to retry, anything else a logged
// serverInternal.
func (s *Server) storeErr(err error, doing string) error {
	var ae *acme.Error
	if errors.As(err, &ae) {
		return err
	}
	return acme.Internal(fmt.Errorf("%s: %w", doing, err))
}

// readErr is a failed read of the what named id: notFound for none, else
// storeErr.
func (s *Server) readErr(err error, what, id string) error {
	if errors.Is(err, store.ErrNotFound) {
		return notFound(what, id)
	}
	return s.storeErr(err, "reading the "+what)
}

// withLocation is an error whose problem response names a resource in
// Location (keyChange's 409 names the account that holds the key).
type withLocation struct {
	url string
	err error
}

func (e withLocation) Error() string { return e.err.Error() }
func (e withLocation) Unwrap() error { return e.err }
