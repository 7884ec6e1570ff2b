package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

func cmdBench(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	var lf loadFlags
	lf.register(fs)
	var sf serverFlags
	sf.register(fs, "hallmark-sqlite,hallmark-postgres,step-ca,pebble")
	conc := fs.String("concurrency", "1,8,32", "comma-separated concurrencies; each is a fresh server and database")
	profDir := fs.String("profile-dir", "", "serve pprof from Hallmark's frontend and worker and save a CPU profile of each run here")
	profSecs := fs.Int("profile-seconds", 10, "length of each CPU profile")
	batches := fs.Int("batches", 1, "drive each server this many times in a row, against the same database, reporting each batch: does a figure drift as the database grows")
	pebbleAttempts := fs.Int("pebble-attempts", 3, "run Pebble again, fresh, after a run that stalls, up to this many runs at each concurrency (it deadlocks under load)")
	_ = fs.Parse(args)
	concs, err := parseConcurrencies(*conc)
	if err != nil {
		return err
	}
	if *profDir != "" {
		if err := os.MkdirAll(*profDir, 0o755); err != nil {
			return err
		}
	}
	work, err := os.MkdirTemp("", "hallmark-load-")
	if err != nil {
		return err
	}
	if !sf.keep {
		defer os.RemoveAll(work)
	}
	resp, err := startResponders("127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer resp.Close()
	env := sf.env(work, resp)
	env.HTTPPort = resp.HTTPPort
	env.ProfileDir, env.ProfileSeconds = *profDir, *profSecs
	if strings.Contains(sf.targets, "postgres") {
		// Figures on PostgreSQL depend on how its server is set up; say so
		// beside them.
		settings, autovacuumOff, err := pgSettings(ctx, sf.postgres)
		if err != nil {
			return err
		}
		fmt.Println(settings)
		if *batches > 1 && autovacuumOff {
			fmt.Println("note: with autovacuum off, dead row versions pile up from batch to batch and each costs more than the last")
		}
	}
	m := matrix{
		concurrencies: concs, targets: splitList(sf.targets), skip: env.missing,
		attempts: func(tg string) int {
			if tg == "pebble" {
				return *pebbleAttempts
			}
			return 1
		},
		run: func(tg string, n int, keep func(*result)) (bool, error) {
			return benchTarget(ctx, env, tg, n, *batches, lf, *profDir, *profSecs, keep)
		},
	}
	results, err := m.runAll(ctx, os.Stdout, os.Stderr)
	printTable(os.Stdout, results)
	return err
}

func parseConcurrencies(s string) ([]int, error) {
	var out []int
	for _, c := range splitList(s) {
		n, err := strconv.Atoi(c)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--concurrency: %q is not a positive number", c)
		}
		out = append(out, n)
	}
	return out, nil
}

// matrix is a bench's runs: every target at each concurrency in turn, the
// targets alternated within a concurrency so each figure has its peers'
// beside it from the same minutes.
type matrix struct {
	concurrencies []int
	targets       []string
	// skip says why a target cannot run here, "" when it can.
	skip func(tg string) string
	// attempts is how many fresh runs a target gets at a concurrency
	// until one completes without stalling.
	attempts func(tg string) int
	// run starts tg fresh and drives it at concurrency n, handing each
	// batch's result to keep; stalled says whether the last batch stalled.
	run func(tg string, n int, keep func(*result)) (stalled bool, err error)
}

// runAll runs the matrix and returns every result in order. A run that
// fails (a server that does not start, or one that stops answering in a
// way the stall detector cannot end) becomes a row saying so and the
// bench goes on; the error returned names Hallmark's failures only: a
// peer's costs its row, not the bench.
func (m matrix) runAll(ctx context.Context, out, log io.Writer) ([]*result, error) {
	var results []*result
	var failures []error
	keep := func(r *result) {
		r.print(out)
		results = append(results, r)
	}
	for _, n := range m.concurrencies {
		for _, tg := range m.targets {
			if ctx.Err() != nil {
				return results, ctx.Err()
			}
			if why := m.skip(tg); why != "" {
				fmt.Fprintln(log, why)
				continue
			}
			err := untilCompleted(m.attempts(tg), func() (bool, error) { return m.run(tg, n, keep) })
			if err == nil {
				continue
			}
			fmt.Fprintf(log, "%s at c=%d FAILED: %v\n", tg, n, err)
			results = append(results, &result{Label: tg, Spec: loadSpec{Concurrency: n}, Failed: err.Error()})
			if !isPeer(tg) {
				failures = append(failures, fmt.Errorf("%s at c=%d: %w", tg, n, err))
			}
		}
	}
	return results, errors.Join(failures...)
}

// untilCompleted calls run up to attempts times (at least once), until a
// run's last batch does not stall; it stops at the first error.
func untilCompleted(attempts int, run func() (stalled bool, err error)) error {
	for i := 0; i < max(attempts, 1); i++ {
		stalled, err := run()
		if err != nil || !stalled {
			return err
		}
	}
	return nil
}

// benchTarget starts target tg fresh, drives it at concurrency n batches
// times in a row, against the same server and database, handing each
// batch's result to keep as it finishes, and stops it. A batch that stalls
// ends the series; stalled says whether the last one did. With more than
// one batch each result's label says which it was and how many issuances
// came before it, so a figure that drifts as the database grows shows as
// one that changes from batch to batch.
func benchTarget(ctx context.Context, env *benchEnv, tg string, n, batches int, lf loadFlags, profDir string, profSecs int, keep func(*result)) (stalled bool, err error) {
	t, err := env.start(ctx, tg)
	if err != nil {
		return false, err
	}
	defer t.stop()
	before := 0
	for b := 1; b <= max(batches, 1); b++ {
		label := t.Label
		if batches > 1 {
			label = fmt.Sprintf("%s, batch %d/%d after %d", t.Label, b, batches, before)
		}
		wait := func() {}
		if profDir != "" {
			name := fmt.Sprintf("%s-c%d", t.Label, n)
			if batches > 1 {
				name += fmt.Sprintf("-b%d", b)
			}
			wait = t.profile(ctx, profDir, name, profSecs)
		}
		start := time.Now()
		r, err := runLoad(ctx, loadSpec{Directory: t.Directory, Roots: t.Roots, Concurrency: n, Count: lf.count,
			Timeout: lf.timeout, Stall: lf.stall, Poll: lf.poll, Responders: env.Resp, Procs: t.Procs})
		wait()
		if err != nil {
			return false, fmt.Errorf("%s: %w", label, err)
		}
		if t.DBURL != "" {
			if jl, jerr := jobLatency(ctx, t.DBURL, start); jerr == nil {
				r.JobLatency = jl
			}
		}
		r.Label = label
		keep(r)
		before += r.OK
		if r.Stalled {
			return true, nil
		}
	}
	return false, nil
}
