package protocol

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// outageLogEvery spaces out the log lines of requests refused for a
// database outage: one line, then one per interval counting those between.
const outageLogEvery = 10 * time.Second

// unavailable is the answer to a failure that is the CA's for a while, not
// the request's: the database unavailable (store.ErrUnavailable, however
// wrapped), an access policy whose deciding rule depends on a check that
// could not answer (access.ErrUnknown), or a plain internal error met once
// the request's deadline had passed. Each is 503 serverInternal with
// Retry-After, so the client retries instead of giving up. nil for any
// other error.
func (s *Server) unavailable(r *http.Request, err error) *acme.Error {
	ae := acme.AsError(err)
	cause := ae.Cause // what storeErr wrapped, for the log
	if cause == nil {
		cause = err
	}
	if ae := s.accessUnknown(err); ae != nil {
		return ae
	}
	if errors.Is(err, store.ErrUnavailable) {
		return &acme.Error{Problem: acme.Problem{Type: acme.ProblemServerInternal, Status: http.StatusServiceUnavailable,
			Detail: fmt.Sprintf("the CA's database is unavailable; retry after %s seconds", retryAfter(s.retry))}, RetryAfter: s.retry, Cause: cause}
	}
	if ae.Problem.Type != acme.ProblemServerInternal || ae.Problem.HTTPStatus() != http.StatusInternalServerError {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || r.Context().Err() != nil {
		return &acme.Error{Problem: acme.Problem{Type: acme.ProblemServerInternal, Status: http.StatusServiceUnavailable,
			Detail: "the request ran out of time; retry shortly"}, RetryAfter: s.retry, Cause: cause}
	}
	return nil
}

// outageLog rate-limits the log of requests refused for an outage: during
// one every request fails the same way, and the first line says it all.
type outageLog struct {
	mu    sync.Mutex
	last  time.Time
	quiet int // refusals since the last line
}

// note reports whether this refusal is logged, and how many were not since
// the last one that was.
func (l *outageLog) note(now time.Time) (log bool, quiet int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < outageLogEvery {
		l.quiet++
		return false, 0
	}
	quiet, l.quiet, l.last = l.quiet, 0, now
	return true, quiet
}
