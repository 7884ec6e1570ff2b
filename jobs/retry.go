package jobs

import (
	"errors"
	"math/rand/v2"
	"time"

	"github.com/riverqueue/river/rivertype"
)

// CouldNotRun marks a handler's error as "the attempt could not happen": the
// database was unreachable, or this worker cannot do the job. Only such
// errors are retried (with backoff); any other error abandons the subject.
func CouldNotRun(err error) error {
	if err == nil {
		return nil
	}
	return &couldNotRunError{err: err}
}

// IsCouldNotRun reports whether err was marked with CouldNotRun.
func IsCouldNotRun(err error) bool {
	var c *couldNotRunError
	return errors.As(err, &c)
}

type couldNotRunError struct{ err error }

func (e *couldNotRunError) Error() string { return "could not run, will retry: " + e.err.Error() }
func (e *couldNotRunError) Unwrap() error { return e.err }

// backoff is the client's retry policy: exponential from base, capped at
// max, with equal jitter (half fixed, half random) so jobs that failed
// together do not retry together, and none retries immediately. It also
// spaces out jobs rescued from a dead worker.
type backoff struct{ base, max time.Duration }

func (b backoff) NextRetry(job *rivertype.JobRow) time.Time {
	return time.Now().UTC().Add(b.delay(job.Attempt))
}

func (b backoff) delay(attempt int) time.Duration {
	d := b.max
	if n := max(attempt, 1) - 1; n < 32 {
		if e := b.base << n; e > 0 && e < b.max {
			d = e
		}
	}
	half := d / 2
	return half + rand.N(d-half+1)
}
