// Command hallmark-load measures a CA by whole issuances: it drives complete
// RFC 8555 flows (newOrder, authorization, http-01 answered by its own
// responder, challenge, polling, finalize, polling, download) at a given
// concurrency and count and reports certificates per second, p50/p99 of
// the whole issuance and of each step, errors by problem type, and the
// server processes' CPU time and peak RSS.
//
// `hallmark-load run` drives a CA that is already running; `hallmark-load
// bench` starts Hallmark (SQLite or a fresh PostgreSQL database) and Pebble
// itself, one fresh instance per run, and prints a table of all runs.
//
// Every socket it opens or dials is on loopback: the client refuses other
// addresses, and its DNS server answers 127.0.0.1 for every name.
package main

import (
	"context"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "run":
		err = cmdRun(ctx, os.Args[2:])
	case "bench":
		err = cmdBench(ctx, os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hallmark-load:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprint(os.Stderr, `usage:
  hallmark-load run   --directory URL --ca-cert PEM [--http-listen ADDR --dns-listen ADDR] [load flags]
  hallmark-load bench [--targets LIST] [--concurrency 1,8,32] [load flags] [server flags]
run "hallmark-load run -h" or "hallmark-load bench -h" for the flags
`)
	os.Exit(2)
}

type loadFlags struct {
	count   int
	timeout time.Duration
	stall   time.Duration
	poll    time.Duration
}

func (l *loadFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&l.count, "count", 200, "issuances per run")
	fs.DurationVar(&l.timeout, "timeout", 2*time.Minute, "stop a run after this long, whatever the count")
	fs.DurationVar(&l.stall, "stall", 10*time.Second, "stop a run when no issuance has finished for this long, and report the rate until then (0: never)")
	fs.DurationVar(&l.poll, "poll", 50*time.Millisecond, "poll no slower than this (the server's Retry-After is honoured when shorter)")
}

func cmdRun(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	var lf loadFlags
	lf.register(fs)
	directory := fs.String("directory", "", "the CA's ACME directory URL (loopback)")
	caCert := fs.String("ca-cert", "", "PEM file of the CA's TLS trust anchor (empty: the system roots)")
	concurrency := fs.Int("concurrency", 8, "concurrent issuances (one account each)")
	httpListen := fs.String("http-listen", "127.0.0.1:5002", "where the http-01 responder listens: the CA's http-01 port")
	dnsListen := fs.String("dns-listen", "127.0.0.1:8053", "where the DNS server listens (every name is A 127.0.0.1): the CA's resolver")
	pids := fs.String("pids", "", "server processes to measure: group=pid,group=pid")
	pgdb := fs.String("pg-database", "", "also measure the PostgreSQL backends connected to this database")
	_ = fs.Parse(args)
	if *directory == "" {
		return fmt.Errorf("--directory is required")
	}
	var roots *x509.CertPool
	if *caCert != "" {
		b, err := os.ReadFile(*caCert)
		if err != nil {
			return err
		}
		roots = x509.NewCertPool()
		roots.AppendCertsFromPEM(b)
	}
	procs := procSet{pids: map[string][]int{}, pgDatabase: *pgdb}
	for _, kv := range splitList(*pids) {
		g, p, ok := strings.Cut(kv, "=")
		pid, err := strconv.Atoi(p)
		if !ok || err != nil {
			return fmt.Errorf("--pids: %q is not group=pid", kv)
		}
		procs.pids[g] = append(procs.pids[g], pid)
	}
	resp, err := startResponders(*httpListen, *dnsListen)
	if err != nil {
		return err
	}
	defer resp.Close()
	fmt.Printf("http-01 responder on 127.0.0.1:%d, DNS on %s\n", resp.HTTPPort, resp.DNSAddr)
	r, err := runLoad(ctx, loadSpec{Directory: *directory, Roots: roots, Concurrency: *concurrency, Count: lf.count,
		Timeout: lf.timeout, Stall: lf.stall, Poll: lf.poll, Responders: resp, Procs: procs})
	if err != nil {
		return err
	}
	r.Label = *directory
	r.print(os.Stdout)
	return nil
}

// benchFlags are bench's flags.
type benchFlags struct {
	load                                              loadFlags
	targets, conc, binDir, pebble, pg, extra, profDir string
	workerConc, maxConns, retryAfter, profSecs        int
	batches, pebbleAttempts                           int
	keep                                              bool
}

func parseBench(args []string) *benchFlags {
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	var b benchFlags
	b.load.register(fs)
	fs.StringVar(&b.targets, "targets", "hallmark-sqlite,hallmark-postgres,pebble", "comma-separated: hallmark-sqlite, hallmark-postgres, hallmark-sqlite-pkcs11, hallmark-postgres-pkcs11 (SoftHSM2), pebble")
	fs.StringVar(&b.conc, "concurrency", "1,8,32", "comma-separated concurrencies; each is a fresh server and database")
	fs.StringVar(&b.binDir, "bin", "bin", "directory holding hallmark, hallmark-frontend and hallmark-worker")
	fs.StringVar(&b.pebble, "pebble", defaultPebble(), "Pebble binary (GOBIN=<dir> go install github.com/letsencrypt/pebble/v2/cmd/pebble@v2.10.3); default $HALLMARK_PEBBLE or tests/pebble's cache")
	fs.StringVar(&b.pg, "postgres", envOr("HALLMARK_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "PostgreSQL admin URL; each run creates and drops its own database")
	fs.IntVar(&b.workerConc, "worker-concurrency", 0, "Hallmark worker.concurrency (0: Hallmark's default, 8, with validations at worker.validation_concurrency's 100)")
	fs.IntVar(&b.maxConns, "max-conns", 0, "Hallmark database.max_conns (0: Hallmark's default, four per CPU)")
	fs.IntVar(&b.retryAfter, "retry-after", 1, "Hallmark server.retry_after_seconds (the generator polls at --poll when that is sooner)")
	fs.StringVar(&b.extra, "hallmark-config-extra", "", "TOML appended to Hallmark's configuration")
	fs.BoolVar(&b.keep, "keep", false, "keep each run's directory and logs")
	fs.StringVar(&b.profDir, "profile-dir", "", "serve pprof from Hallmark's frontend and worker and save a CPU profile of each run here")
	fs.IntVar(&b.profSecs, "profile-seconds", 10, "length of each CPU profile")
	fs.IntVar(&b.batches, "batches", 1, "drive each server this many times in a row, against the same database, reporting each batch: does a figure drift as the database grows")
	fs.IntVar(&b.pebbleAttempts, "pebble-attempts", 3, "run Pebble again, fresh, after a run that stalls, up to this many runs at each concurrency (it deadlocks under load)")
	_ = fs.Parse(args)
	// The servers run with their own working directory; a relative --bin or
	// --pebble would not resolve there.
	for _, p := range []*string{&b.binDir, &b.pebble} {
		if *p == "" {
			continue
		}
		if abs, err := filepath.Abs(*p); err == nil {
			*p = abs
		}
	}
	return &b
}

func cmdBench(ctx context.Context, args []string) error {
	b := parseBench(args)
	if b.profDir != "" {
		if err := os.MkdirAll(b.profDir, 0o755); err != nil {
			return err
		}
	}
	work, err := os.MkdirTemp("", "hallmark-load-")
	if err != nil {
		return err
	}
	if !b.keep {
		defer os.RemoveAll(work)
	}
	resp, err := startResponders("127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer resp.Close()
	env := &benchEnv{BinDir: b.binDir, Pebble: b.pebble, PostgresURL: b.pg, WorkDir: work, Resp: resp, Keep: b.keep,
		Log: os.Stderr, WorkerConcurrency: b.workerConc, MaxConns: b.maxConns, RetryAfterSeconds: b.retryAfter, ExtraConfig: b.extra,
		ProfileDir: b.profDir, ProfileSeconds: b.profSecs}
	if strings.Contains(b.targets, "postgres") {
		// Figures on PostgreSQL depend on how its server is set up; say so
		// beside them.
		settings, autovacuumOff, err := pgSettings(ctx, b.pg)
		if err != nil {
			return err
		}
		fmt.Println(settings)
		if b.batches > 1 && autovacuumOff {
			fmt.Println("note: with autovacuum off, dead row versions pile up from batch to batch and each costs more than the last")
		}
	}
	results, err := benchAll(ctx, env, b)
	if err != nil {
		return err
	}
	printTable(os.Stdout, results)
	return nil
}

// benchAll runs every target at every concurrency, printing each result
// as it comes.
func benchAll(ctx context.Context, env *benchEnv, b *benchFlags) ([]*result, error) {
	var results []*result
	for _, c := range splitList(b.conc) {
		n, err := strconv.Atoi(c)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--concurrency: %q is not a positive number", c)
		}
		for _, tg := range splitList(b.targets) {
			if tg == "pebble" && env.Pebble == "" {
				fmt.Fprintln(os.Stderr, "SKIPPING pebble: no binary; GOBIN=<dir> go install github.com/letsencrypt/pebble/v2/cmd/pebble@v2.10.3 and pass --pebble <dir>/pebble")
				continue
			}
			runs := 1
			if tg == "pebble" {
				runs = b.pebbleAttempts
			}
			err := untilCompleted(runs, func() (bool, error) {
				return benchTarget(ctx, env, tg, n, b.batches, b.load, b.profDir, b.profSecs, func(r *result) {
					r.print(os.Stdout)
					results = append(results, r)
				})
			})
			if err != nil {
				return nil, err
			}
		}
	}
	return results, nil
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
	var t *target
	switch tg {
	case "hallmark-sqlite":
		t, err = env.startHallmark(ctx, "sqlite", "local")
	case "hallmark-postgres":
		t, err = env.startHallmark(ctx, "postgres", "local")
	case "hallmark-sqlite-pkcs11":
		t, err = env.startHallmark(ctx, "sqlite", "pkcs11")
	case "hallmark-postgres-pkcs11":
		t, err = env.startHallmark(ctx, "postgres", "pkcs11")
	case "pebble":
		t, err = env.startPebble(ctx)
	default:
		err = fmt.Errorf("--targets: unknown target %q", tg)
	}
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

// printTable is the summary of every run, each figure beside Pebble's at
// the same concurrency when Pebble ran: its best completed run there, or,
// when every run stalled (see --stall, --pebble-attempts), its best rate
// until a stall. A rate until a stall is measured over fewer issuances,
// some only the first few, so a completed run is the better reference even
// when slower.
func printTable(w io.Writer, rs []*result) {
	pebble := map[int]*result{}
	better := func(r, than *result) bool {
		switch {
		case than == nil:
			return true
		case r.Stalled != than.Stalled:
			return !r.Stalled
		default:
			return r.RatePerSec() > than.RatePerSec()
		}
	}
	for _, r := range rs {
		if strings.HasPrefix(r.Label, "pebble") && better(r, pebble[r.Spec.Concurrency]) {
			pebble[r.Spec.Concurrency] = r
		}
	}
	fmt.Fprintln(w, "\n| target | c | n ok | certs/s | vs Pebble | total p50/p99 ms | newOrder p50 | chall→valid p50 | finalize→valid p50 | download p50 | server CPU ms/cert | requests/cert | peak RSS MiB | errors |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		ratio := "—"
		if p := pebble[r.Spec.Concurrency]; p != nil && p.RatePerSec() > 0 {
			ratio = fmt.Sprintf("%.2f×", r.RatePerSec()/p.RatePerSec())
		}
		rate := fmt.Sprintf("%.1f", r.RatePerSec())
		if r.Stalled {
			rate += " until it stalled"
		}
		var rss int64
		for _, v := range r.PeakRSSKiB {
			rss += v
		}
		errs := 0
		for _, v := range r.Errors {
			errs += v
		}
		p50 := func(s string) string { return ms(percentile(r.Steps[s], 0.5)) }
		reqs := 0.0
		if r.OK > 0 {
			reqs = float64(r.Requests) / float64(r.OK)
		}
		fmt.Fprintf(w, "| %s | %d | %d | %s | %s | %s / %s | %s | %s | %s | %s | %.2f | %.1f | %.0f | %d |\n",
			r.Label, r.Spec.Concurrency, r.OK, rate, ratio,
			p50(stepTotal), ms(percentile(r.Steps[stepTotal], 0.99)), p50(stepNewOrder), p50(stepChallenge), p50(stepFinalize), p50(stepDownload),
			float64(r.CPUPerCert())/float64(time.Millisecond), reqs, float64(rss)/1024, errs)
	}
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// defaultPebble is $HALLMARK_PEBBLE, else the binary tests/pebble caches
// under the temporary directory, else "".
func defaultPebble() string {
	if p := os.Getenv("HALLMARK_PEBBLE"); p != "" {
		return p
	}
	p := filepath.Join(os.TempDir(), "hallmark-pebble-v2.10.3", "pebble")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return ""
}
