// Package testworker runs a real worker in a test's own process, serving
// only the queues the test names: a test that needs one backend's jobs
// done (a custom backend's hooks, a relay) and records everything else
// itself.
package testworker

import (
	"context"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/worker"
)

// Serve runs w's handlers on q for queues only, with w's own settings
// (worker.JobSettings, as hallmark-worker starts them) less its periodic
// and scheduled jobs: the test queues what it checks. tune, when not nil,
// adjusts the settings first (retry pacing, say). The runner is stopped
// when the test ends.
func Serve(t testing.TB, w *worker.Worker, q jobs.Queue, tune func(*jobs.Settings), queues ...string) {
	t.Helper()
	reg, err := w.Registry()
	if err != nil {
		t.Fatal(err)
	}
	s := w.JobSettings()
	s.Queues, s.Periodic, s.Scheduled = queues, nil, nil
	if tune != nil {
		tune(&s)
	}
	run, err := q.Start(context.Background(), reg, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = run.Stop(ctx)
	})
}
