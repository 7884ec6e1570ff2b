// Command hallmark-load measures a CA by whole issuances: it drives complete
// RFC 8555 flows (newOrder, authorization, http-01 answered by its own
// responder, challenge, polling, finalize, polling, download) at a given
// concurrency and count and reports certificates per second, p50/p99 of
// the whole issuance and of each step, errors by problem type, and the
// server processes' CPU time and peak RSS.
//
// `hallmark-load run` drives a CA that is already running; `hallmark-load
// bench` starts Hallmark (SQLite or a fresh PostgreSQL database), step-ca
// and Pebble itself, one fresh instance per run, and prints a table of all
// runs; `hallmark-load clients` times real ACME clients (lego, certbot)
// against the same targets.
//
// Every socket it opens or dials is on loopback: the client refuses other
// addresses, and its DNS server answers 127.0.0.1 for every name.
package main

import (
	"context"
	"crypto/x509"
	"flag"
	"fmt"
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
	case "clients":
		err = cmdClients(ctx, os.Args[2:])
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
  hallmark-load clients [--targets LIST] [--clients lego,certbot] [--count 10] [server flags]
run "hallmark-load <command> -h" for the flags
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
