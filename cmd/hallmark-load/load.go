package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// loadSpec is one load run against one ACME directory.
type loadSpec struct {
	Directory   string
	Roots       *x509.CertPool
	Concurrency int
	Count       int
	Timeout     time.Duration
	// Stall ends the run early when no issuance has finished, well or
	// badly, for this long: a server that stopped answering (Pebble
	// deadlocks under load) would otherwise hold the run to Timeout and
	// leave no rate to compare with. Zero never stops.
	Stall      time.Duration
	Poll       time.Duration
	Responders *responders
	// Procs are the server's processes, measured before and after.
	Procs procSet
}

// result is what a load run measured.
type result struct {
	Label      string
	Spec       loadSpec
	OK         int
	Wall       time.Duration
	Steps      map[string][]time.Duration
	Errors     map[string]int
	Example    map[string]string        // the first error of each kind, in full
	CPU        map[string]time.Duration // per process group, during the timed part
	Switches   map[string]int64         // context switches per process group, during the timed part
	PeakRSSKiB map[string]int64         // VmHWM, file pages of the binary included
	// PeakAnonKiB is the highest anonymous resident memory (heap, stacks)
	// sampled per group during the timed part (procSet.anonPeaks).
	PeakAnonKiB map[string]int64
	PGCommits   int64 // transactions the run's PostgreSQL database committed
	Requests    int   // HTTP requests the clients sent during the timed part
	// RequestTimes is each answered request of the timed part by kind
	// (requestKinds).
	RequestTimes map[string][]time.Duration
	// SelfCPU is the generator's own CPU during the timed part: it runs on
	// the same cores as the server, so it bounds what any server can do.
	SelfCPU      time.Duration
	SelfSwitches int64
	JobLatency   string
	TimedOut     bool
	// Stalled says Stall ended the run; Active is from the start to the
	// last successful issuance, the span RatePerSec counts over.
	Stalled bool
	Active  time.Duration
	// Failed is why the run could not be made (the server did not start,
	// or answered with an error before the clock started); a row of its
	// own, so the bench goes on.
	Failed string
}

func (r *result) CertsPerSec() float64 {
	if r.Wall <= 0 {
		return 0
	}
	return float64(r.OK) / r.Wall.Seconds()
}

// RatePerSec is CertsPerSec, except for a run that stalled: there it is the
// rate until the last issuance before the stall, the server's speed while
// it still answered.
func (r *result) RatePerSec() float64 {
	if !r.Stalled {
		return r.CertsPerSec()
	}
	if r.Active <= 0 {
		return 0
	}
	return float64(r.OK) / r.Active.Seconds()
}

// CPUPerCert is the server CPU over every group per issued certificate.
func (r *result) CPUPerCert(groups ...string) time.Duration {
	if r.OK == 0 {
		return 0
	}
	var sum time.Duration
	for g, d := range r.CPU {
		if strings.HasPrefix(g, sharedPrefix) {
			continue
		}
		if len(groups) == 0 || contains(groups, g) {
			sum += d
		}
	}
	return sum / time.Duration(r.OK)
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// runLoad creates one account per concurrent client (untimed), then runs
// Count issuances on Concurrency goroutines, each for a fresh name, until
// done or Timeout. A server that stops answering while the accounts are
// made ends the run as stalled too, with nothing issued.
func runLoad(ctx context.Context, spec loadSpec) (*result, error) {
	hc := newHTTPClient(spec.Roots, spec.Concurrency)
	clients, keys, err := createAccounts(ctx, spec, hc)
	if errors.Is(err, errStalled) {
		kind := "stalled creating accounts (--stall reached)"
		return &result{Spec: spec, Stalled: true, Steps: map[string][]time.Duration{},
			Errors: map[string]int{kind: 1}, Example: map[string]string{kind: err.Error()}}, nil
	}
	if err != nil {
		return nil, err
	}
	run := make([]byte, 4)
	_, _ = rand.Read(run)
	prefix := hex.EncodeToString(run)

	res := &result{Spec: spec, Steps: map[string][]time.Duration{}, Errors: map[string]int{}, Example: map[string]string{}}
	tl := &tally{res: res}
	var next atomic.Int64
	timed, cancel := context.WithTimeout(ctx, spec.Timeout)
	defer cancel()
	tctx, stop := context.WithCancelCause(timed)
	defer stop(nil)

	for _, c := range clients {
		c.requests, c.took = 0, nil // account creation is not timed
	}
	before, err := spec.Procs.sample()
	if err != nil {
		return nil, err
	}
	selfBefore, switchesBefore := selfCPU(), selfSwitches()
	actx, endAnon := context.WithCancel(context.Background())
	defer endAnon() // an early return stops the sampler too
	anonPeaks := spec.Procs.anonPeaks(actx, 100*time.Millisecond)
	start := time.Now()
	var progress stallWatch
	progress.finished(start)
	if spec.Stall > 0 {
		go progress.watch(tctx, spec.Stall, func() { stop(errStalled) })
	}
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() { defer wg.Done(); tl.issueAll(tctx, spec, clients[i], keys[i], prefix, &next, &progress) }()
	}
	wg.Wait()
	res.Wall = time.Since(start)
	res.SelfCPU = selfCPU() - selfBefore
	res.SelfSwitches = selfSwitches() - switchesBefore
	res.addRequests(clients)
	res.Stalled = errors.Is(context.Cause(tctx), errStalled)
	res.TimedOut = !res.Stalled && tctx.Err() != nil && next.Load() <= int64(spec.Count)
	if res.OK > 0 {
		res.Active = tl.lastOK.Sub(start)
	}
	if spec.Procs.pgAdmin != "" {
		time.Sleep(1500 * time.Millisecond) // let the statistics collector catch up
	}
	endAnon()
	res.PeakAnonKiB = anonPeaks()
	after, err := spec.Procs.sample()
	if err != nil {
		return nil, err
	}
	res.CPU = diffCPU(before, after)
	res.Switches = diffSwitches(before, after)
	res.PeakRSSKiB = after.rss
	res.PGCommits = after.commits - before.commits
	return res, nil
}

// tally collects a run's issuances from every goroutine.
type tally struct {
	mu     sync.Mutex
	res    *result
	lastOK time.Time
}

// issueAll is one client's loop: issue for fresh names, numbered from
// next, until the run's count is reached or ctx ends.
func (t *tally) issueAll(ctx context.Context, spec loadSpec, c *client, key *ecdsa.PrivateKey, prefix string, next *atomic.Int64, progress *stallWatch) {
	for {
		n := next.Add(1)
		if n > int64(spec.Count) || ctx.Err() != nil {
			return
		}
		name := fmt.Sprintf("i%d-%s.load.test", n, prefix)
		d, err := c.issue(ctx, name, key, spec.Responders.Tokens)
		done := time.Now()
		progress.finished(done)
		t.add(ctx, d, err, done)
		if err != nil {
			// A failed request may have left no nonce; fetch one.
			c.nonce = ""
		}
	}
}

// add records one issuance that ended at done: its steps, or its error by
// kind with the first of each kind in full.
func (t *tally) add(ctx context.Context, d map[string]time.Duration, err error, done time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		k := errorKind(err, ctx)
		if t.res.Errors[k]++; t.res.Errors[k] == 1 {
			t.res.Example[k] = err.Error()
		}
		return
	}
	t.res.OK++
	t.lastOK = done
	for k, v := range d {
		t.res.Steps[k] = append(t.res.Steps[k], v)
	}
}

// addRequests sums the requests the clients sent and their times by kind.
func (r *result) addRequests(clients []*client) {
	r.RequestTimes = map[string][]time.Duration{}
	for _, c := range clients {
		r.Requests += c.requests
		for k, ds := range c.took {
			r.RequestTimes[k] = append(r.RequestTimes[k], ds...)
		}
	}
}

// createAccounts fetches the directory and makes one account and one
// certificate key per client, within Timeout; when Stall passes without
// an account made the error wraps errStalled.
func createAccounts(ctx context.Context, spec loadSpec, hc *http.Client) ([]*client, []*ecdsa.PrivateKey, error) {
	timed, cancel := context.WithTimeout(ctx, spec.Timeout)
	defer cancel()
	sctx, stop := context.WithCancelCause(timed)
	defer stop(nil)
	var progress stallWatch
	progress.finished(time.Now())
	if spec.Stall > 0 {
		go progress.watch(sctx, spec.Stall, func() { stop(errStalled) })
	}
	fail := func(err error) ([]*client, []*ecdsa.PrivateKey, error) {
		if cause := context.Cause(sctx); errors.Is(cause, errStalled) {
			return nil, nil, fmt.Errorf("%w: %v", errStalled, err)
		}
		return nil, nil, err
	}
	dir, err := fetchDirectory(sctx, hc, spec.Directory)
	if err != nil {
		return fail(err)
	}
	clients := make([]*client, spec.Concurrency)
	keys := make([]*ecdsa.PrivateKey, spec.Concurrency)
	for i := range clients {
		if clients[i], err = newAccount(sctx, hc, dir, spec.Poll); err != nil {
			return fail(err)
		}
		progress.finished(time.Now())
		// One certificate key per client: generating a key per issuance
		// would measure the generator.
		if keys[i], err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			return nil, nil, err
		}
	}
	return clients, keys, nil
}

// errStalled is the cause a run's context ends with when Stall passed
// without an issuance finishing.
var errStalled = errors.New("no issuance finished within --stall")

// stallWatch notices a run making no progress: finished records when an
// issuance last ended; watch calls stalled once that is longer ago than
// limit.
type stallWatch struct{ last atomic.Int64 } // UnixNano

func (w *stallWatch) finished(t time.Time) { w.last.Store(t.UnixNano()) }

func (w *stallWatch) watch(ctx context.Context, limit time.Duration, stalled func()) {
	every := min(limit/4, 250*time.Millisecond)
	if every <= 0 {
		every = time.Millisecond // a --stall of a few ns: NewTicker refuses zero
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if now.Sub(time.Unix(0, w.last.Load())) >= limit {
				stalled()
				return
			}
		}
	}
}

// errorKind names a failure by its problem type, or by what went wrong
// when the server sent no problem document.
func errorKind(err error, ctx context.Context) string {
	var pe *problemError
	switch {
	case errors.As(err, &pe):
		return strings.TrimPrefix(pe.Type, "urn:ietf:params:acme:error:")
	case errors.Is(context.Cause(ctx), errStalled):
		return "stalled (--stall reached)"
	case ctx.Err() != nil:
		return "timeout (--timeout reached)"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	default:
		return "transport/other"
	}
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }

// print writes one run's report.
func (r *result) print(w io.Writer) {
	fmt.Fprintf(w, "== %s: concurrency %d, count %d, poll ≤ %s\n", r.Label, r.Spec.Concurrency, r.Spec.Count, r.Spec.Poll)
	fmt.Fprintf(w, "issued %d in %.2fs: %.1f certificates/s", r.OK, r.Wall.Seconds(), r.CertsPerSec())
	if r.TimedOut {
		fmt.Fprintf(w, " (stopped by --timeout %s)", r.Spec.Timeout)
	}
	fmt.Fprintln(w)
	if r.Stalled {
		fmt.Fprintf(w, "  STALLED: no issuance finished for --stall %s; the %d before it took %.2fs: %.1f certificates/s until the stall\n",
			r.Spec.Stall, r.OK, r.Active.Seconds(), r.RatePerSec())
	}
	fmt.Fprintf(w, "  %-16s %9s %9s\n", "step (ms)", "p50", "p99")
	for _, s := range steps {
		fmt.Fprintf(w, "  %-16s %9s %9s\n", s, ms(percentile(r.Steps[s], 0.5)), ms(percentile(r.Steps[s], 0.99)))
	}
	if len(r.Errors) == 0 {
		fmt.Fprintln(w, "  errors: none")
	}
	if r.OK > 0 {
		fmt.Fprintf(w, "  requests %d = %.1f per certificate\n", r.Requests, float64(r.Requests)/float64(r.OK))
	}
	if r.OK > 0 {
		for _, k := range requestKinds {
			if ds := r.RequestTimes[k]; len(ds) > 0 {
				fmt.Fprintf(w, "  request %-20s p50 %6s p99 %6s ms, %.2f per certificate\n", k, ms(percentile(ds, 0.5)), ms(percentile(ds, 0.99)), float64(len(ds))/float64(r.OK))
			}
		}
	}
	for _, k := range sortedKeys(r.Errors) {
		fmt.Fprintf(w, "  error %-40s %d (first: %.300s)\n", k, r.Errors[k], r.Example[k])
	}
	for _, g := range sortedKeys(r.CPU) {
		per := time.Duration(0)
		if r.OK > 0 {
			per = r.CPU[g] / time.Duration(r.OK)
		}
		rss := ""
		if kib, ok := r.PeakRSSKiB[g]; ok {
			rss = fmt.Sprintf(", peak RSS %.1f MiB", float64(kib)/1024)
			if anon, ok := r.PeakAnonKiB[g]; ok {
				rss += fmt.Sprintf(" (anonymous %.1f)", float64(anon)/1024)
			}
		}
		cs := ""
		if n, ok := r.Switches[g]; ok && r.OK > 0 {
			cs = fmt.Sprintf(", %.0f context switches/cert", float64(n)/float64(r.OK))
		}
		fmt.Fprintf(w, "  cpu %-22s %8.2fs = %6.2f ms/cert%s%s\n", g, r.CPU[g].Seconds(), float64(per)/float64(time.Millisecond), rss, cs)
	}
	if r.PGCommits > 0 && r.OK > 0 {
		fmt.Fprintf(w, "  postgres commits %d = %.1f per certificate (includes the worker's idle housekeeping)\n", r.PGCommits, float64(r.PGCommits)/float64(r.OK))
	}
	fmt.Fprint(w, r.JobLatency)
	if len(r.CPU) > 0 {
		fmt.Fprintf(w, "  cpu %-22s %6.2f ms/cert (shared groups excluded)\n", "server total", float64(r.CPUPerCert())/float64(time.Millisecond))
	}
	if r.OK > 0 {
		fmt.Fprintf(w, "  cpu %-22s %6.2f ms/cert, %.0f context switches/cert (the client, DNS and http-01 responder; same cores)\n", "load generator",
			float64(r.SelfCPU/time.Duration(r.OK))/float64(time.Millisecond), float64(r.SelfSwitches)/float64(r.OK))
	}
}

// selfSwitches is how many times this process's threads have been
// switched out so far, voluntarily or not.
func selfSwitches() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Nvcsw + ru.Nivcsw
}

// selfCPU is this process's user+system CPU so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
