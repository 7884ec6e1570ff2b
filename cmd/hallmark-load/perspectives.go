package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Multi-perspective validation under load (docs/operations.md,
// "Multi-perspective validation"): the target hallmark-postgres-persp is
// hallmark-postgres whose every validation is corroborated by remote
// perspectives. All of them are honest: each is a hallmark-worker with
// worker.perspective, resolving through the generator's DNS server and
// fetching from its responder, as the primary does. What the run measures
// beside hallmark-postgres is what corroboration adds to an issuance.

// perspectiveName is the name of the i-th perspective, from 1.
func perspectiveName(i int) string { return "p" + strconv.Itoa(i) }

// perspectiveTables is the configuration that makes n perspectives
// corroborate every validation: [challenge.perspectives] naming them, and
// the built-in default profile, whole (a [profiles.x] table replaces the
// built-in one), with perspectives = true. With every mounted profile
// requiring corroboration the primary asks without reading which profiles
// use an authorization, as a publicly-trusted CA would run.
func perspectiveTables(n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = strconv.Quote(perspectiveName(i + 1))
	}
	return fmt.Sprintf(`
[challenge.perspectives]
names = [%s]

[profiles.default]
description = "90-day TLS server certificate, corroborated by remote perspectives"
backend = "local"
validity_hours = 2160
key_types = ["rsa2048", "rsa3072", "rsa4096", "p256", "p384"]
challenges = ["http-01", "dns-01", "tls-alpn-01"]
identifier_types = ["dns", "ip"]
allow_wildcards = true
key_usages = ["digitalSignature", "keyEncipherment"]
ext_key_usages = ["serverAuth"]
perspectives = true
`, strings.Join(names, ", "))
}

// perspectiveConfig is the primary's configuration for a worker serving
// perspective name: its own health listener, no pprof listener, and
// worker.perspective.
func (e *benchEnv) perspectiveConfig(dbURL string, p hallmarkPorts, top, tables, name string, health int) string {
	p.health, p.pprofWorker = health, ""
	cfg := top + e.hallmarkConfig(dbURL, p, tables)
	return strings.Replace(cfg, "\n[worker]\n", fmt.Sprintf("\n[worker]\nperspective = %q\n", name), 1)
}

// startPerspective starts a hallmark-worker serving perspective name for
// the Hallmark in dir, counts its CPU and memory with t's under the group
// "perspectives", and waits until it is ready. stop, when not nil, stops
// it, also after an error.
func (e *benchEnv) startPerspective(ctx context.Context, t *target, dir, dbURL string, ports hallmarkPorts, top, tables, name string) (stop func(), err error) {
	health, err := freePort()
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "perspective-"+name+".toml")
	if err := os.WriteFile(cfgPath, []byte(e.perspectiveConfig(dbURL, ports, top, tables, name, health)), 0o644); err != nil {
		return nil, err
	}
	logName := "perspective-" + name + ".log"
	pid, stop, err := e.startProcess(dir, logName, nil, filepath.Join(e.BinDir, "hallmark-worker"), "--config", cfgPath)
	if err != nil {
		return nil, err
	}
	t.Procs.pids["perspectives"] = append(t.Procs.pids["perspectives"], pid)
	if err := waitReady(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", health)); err != nil {
		logText, _ := os.ReadFile(filepath.Join(dir, logName))
		return stop, fmt.Errorf("perspective %s: %w; its log:\n%s", name, err, tail(logText, 2000))
	}
	return stop, nil
}
