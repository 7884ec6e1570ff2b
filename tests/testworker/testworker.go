// Package testworker runs a real worker in a test's own process, serving
// only the queues the test names: a test that needs one backend's jobs
// done (a custom backend's hooks, a relay) and records everything else
// itself.
package testworker

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/signer/signerconf"
	"github.com/hallmark-ca/hallmark/worker"
	"github.com/hallmark-ca/hallmark/worker/workerconf"
)

// Config is a worker's configuration for a test: [worker], [challenge]
// and [ca] as shipped, the built-in profile "default" and profiles, and
// resolvers as challenge.resolvers, which a worker requires.
func Config(profiles map[string]profile.Profile, resolvers ...string) worker.Config {
	c := worker.Config{Worker: workerconf.DefaultWorker(), Challenge: workerconf.DefaultChallenge(), CA: signerconf.DefaultCA(),
		Profiles: map[string]profile.Profile{"default": profile.Default()}}
	maps.Copy(c.Profiles, profiles)
	c.Challenge.Resolvers = resolvers
	return c
}

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
