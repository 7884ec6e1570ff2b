package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The targets bench and clients start, one fresh server per run.
const targetList = "hallmark-sqlite, hallmark-postgres, hallmark-postgres-persp (--perspectives remote perspectives corroborate each validation), hallmark-sqlite-pkcs11, hallmark-postgres-pkcs11 (SoftHSM2), step-ca, pebble"

// serverFlags are what bench and clients need to start the targets.
type serverFlags struct {
	targets    string
	binDir     string
	pebble     string
	stepCA     string
	postgres   string
	workerConc int
	maxConns   int
	retryAfter int
	// verdictWait is server.verdict_wait_ms; below 0, Hallmark's default.
	verdictWait int
	// perspectives is how many perspective workers hallmark-postgres-persp starts.
	perspectives int
	extra        string
	keep         bool
}

func (s *serverFlags) register(fs *flag.FlagSet, defaultTargets string) {
	fs.StringVar(&s.targets, "targets", defaultTargets, "comma-separated: "+targetList)
	fs.StringVar(&s.binDir, "bin", "bin", "directory holding hallmark, hallmark-frontend and hallmark-worker")
	fs.StringVar(&s.pebble, "pebble", defaultPebble(), "Pebble binary (GOBIN=<dir> go install github.com/letsencrypt/pebble/v2/cmd/pebble@v2.10.3); default $HALLMARK_PEBBLE or tests/pebble's cache")
	fs.StringVar(&s.stepCA, "step-ca", defaultStepCA(), "step-ca binary (CGO_ENABLED=0 GOBIN=<dir> go install github.com/smallstep/certificates/cmd/step-ca@"+StepCAVersion+"); default $HALLMARK_STEP_CA or $HOME/.cache/hallmark-tools/step-ca-"+StepCAVersion+"/step-ca")
	fs.StringVar(&s.postgres, "postgres", envOr("HALLMARK_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "PostgreSQL admin URL; each run creates and drops its own database")
	fs.IntVar(&s.workerConc, "worker-concurrency", 0, "Hallmark worker.concurrency (0: Hallmark's default, 8, with validations at worker.validation_concurrency's 100)")
	fs.IntVar(&s.maxConns, "max-conns", 0, "Hallmark database.max_conns (0: Hallmark's default, four per CPU)")
	fs.IntVar(&s.retryAfter, "retry-after", 1, "Hallmark server.retry_after_seconds (the generator polls at --poll when that is sooner)")
	fs.IntVar(&s.verdictWait, "verdict-wait-ms", -1, "Hallmark server.verdict_wait_ms (-1: Hallmark's default; 0 answers processing at once)")
	fs.IntVar(&s.perspectives, "perspectives", 3, "remote perspectives the target hallmark-postgres-persp starts, each a hallmark-worker with worker.perspective on the same loopback resolver and responder; its default profile requires their corroboration")
	fs.StringVar(&s.extra, "hallmark-config-extra", "", "TOML appended to Hallmark's configuration")
	fs.BoolVar(&s.keep, "keep", false, "keep each run's directory and logs")
}

// env makes the binaries' paths absolute (the servers run in their own
// working directories, where a relative path would not resolve) and
// returns what every target shares; the caller sets HTTPPort.
func (s *serverFlags) env(work string, resp *responders) *benchEnv {
	for _, p := range []*string{&s.binDir, &s.pebble, &s.stepCA} {
		if *p == "" {
			continue
		}
		if abs, err := filepath.Abs(*p); err == nil {
			*p = abs
		}
	}
	return &benchEnv{BinDir: s.binDir, Pebble: s.pebble, StepCA: s.stepCA, PostgresURL: s.postgres, WorkDir: work,
		Resp: resp, Keep: s.keep, Log: os.Stderr, WorkerConcurrency: s.workerConc, MaxConns: s.maxConns,
		RetryAfterSeconds: s.retryAfter, VerdictWaitMS: s.verdictWait, ExtraConfig: s.extra, Perspectives: s.perspectives}
}

// start starts target tg fresh.
func (e *benchEnv) start(ctx context.Context, tg string) (*target, error) {
	switch tg {
	case "hallmark-sqlite":
		return e.startHallmark(ctx, "sqlite", "local", 0)
	case "hallmark-postgres":
		return e.startHallmark(ctx, "postgres", "local", 0)
	case "hallmark-postgres-persp":
		return e.startHallmark(ctx, "postgres", "local", max(e.Perspectives, 1))
	case "hallmark-sqlite-pkcs11":
		return e.startHallmark(ctx, "sqlite", "pkcs11", 0)
	case "hallmark-postgres-pkcs11":
		return e.startHallmark(ctx, "postgres", "pkcs11", 0)
	case "pebble":
		return e.startPebble(ctx)
	case "step-ca":
		return e.startStepCA(ctx)
	}
	return nil, fmt.Errorf("--targets: unknown target %q (%s)", tg, targetList)
}

// missing says why target tg cannot run here ("" when it can): a peer
// whose binary was not given is left out, loudly, rather than failing the
// whole bench.
func (e *benchEnv) missing(tg string) string {
	switch {
	case tg == "pebble" && e.Pebble == "":
		return "SKIPPING pebble: no binary; GOBIN=<dir> go install github.com/letsencrypt/pebble/v2/cmd/pebble@v2.10.3 and pass --pebble <dir>/pebble"
	case tg == "step-ca" && e.StepCA == "":
		return "SKIPPING step-ca: no binary; CGO_ENABLED=0 GOBIN=<dir> go install github.com/smallstep/certificates/cmd/step-ca@" + StepCAVersion + " and pass --step-ca <dir>/step-ca"
	}
	return ""
}

// isPeer says whether tg is a reference CA rather than Hallmark: a peer's
// failure costs its row, not the bench's exit status.
func isPeer(tg string) bool { return !strings.HasPrefix(tg, "hallmark") }

// defaultStepCA is $HALLMARK_STEP_CA, else the binary .ci/run and
// tests/loadbench cache in the tools directory ($HALLMARK_TOOLS_DIR or
// $HOME/.cache/hallmark-tools), else "".
func defaultStepCA() string {
	if p := os.Getenv("HALLMARK_STEP_CA"); p != "" {
		return p
	}
	tools := os.Getenv("HALLMARK_TOOLS_DIR")
	if tools == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		tools = filepath.Join(home, ".cache", "hallmark-tools")
	}
	p := filepath.Join(tools, "step-ca-"+StepCAVersion, "step-ca")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return ""
}
