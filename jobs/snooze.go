package jobs

import (
	"errors"
	"time"

	"github.com/riverqueue/river"
)

// Snooze puts the job back to run again after d, as though this run had not
// happened: River takes the run off the job's attempt count, so a job may be
// snoozed any number of times and is never abandoned for it. Its subject
// stays processing with an outstanding job, so Recover leaves it alone too.
// Each snooze is a database write (batched with completions), and a job
// snoozed by less than River's scheduler interval (5 s) is fetched again as
// soon as it is due: pick d so that a job waiting its turn is not fetched
// and put back in a tight loop.
func Snooze(d time.Duration) error {
	return river.JobSnooze(max(d, 0))
}

// isSnooze reports whether err is a Snooze.
func isSnooze(err error) bool {
	var s *river.JobSnoozeError
	return errors.As(err, &s)
}
