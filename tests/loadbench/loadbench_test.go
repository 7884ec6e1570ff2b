// Package loadbench runs `make bench`'s load generator end to end against
// real Hallmark binaries, small, so that the tool the performance figures
// come from is known to work: every batch issues, and the report says what
// it measured.
package loadbench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/tests/harness"
	"github.com/hallmark-ca/hallmark/tests/pebble"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

var loadBin string

func TestMain(m *testing.M) {
	cleanup, err := harness.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "hallmark-load-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		cleanup()
		os.Exit(1)
	}
	loadBin = filepath.Join(dir, "hallmark-load")
	cmd := exec.Command("go", "build", "-o", loadBin, "github.com/hallmark-ca/hallmark/cmd/hallmark-load")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	code := 1
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building hallmark-load:", err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	cleanup()
	os.Exit(code)
}

// TestBatches: with --batches, each target is driven twice against the same
// server and database, and the table has a row per batch saying how many
// issuances came before it, each with every issuance done and no error; on
// PostgreSQL the server's settings are printed beside the figures.
func TestBatches(t *testing.T) {
	admin := testdb.Postgres(t) // the bench creates and drops its own database from here
	const count = 6
	cmd := exec.Command(loadBin, "bench", "--bin", filepath.Dir(harness.Bin("hallmark")),
		"--targets", "hallmark-sqlite,hallmark-postgres", "--concurrency", "2",
		"--count", fmt.Sprint(count), "--batches", "2", "--timeout", "60s", "--postgres", admin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hallmark-load bench: %v\n%s", err, out)
	}
	report := string(out)
	if !regexp.MustCompile(`(?m)^PostgreSQL \S+.*: autovacuum (on|off), synchronous_commit \w+, fsync (on|off)`).MatchString(report) {
		t.Errorf("the report does not give PostgreSQL's settings:\n%s", report)
	}
	var rows []string
	for _, l := range strings.Split(report, "\n") {
		if strings.HasPrefix(l, "| hallmark") {
			rows = append(rows, l)
		}
	}
	want := []string{
		"| hallmark sqlite local, batch 1/2 after 0 | 2 | 6 |",
		"| hallmark sqlite local, batch 2/2 after 6 | 2 | 6 |",
		"| hallmark postgres local, batch 1/2 after 0 | 2 | 6 |",
		"| hallmark postgres local, batch 2/2 after 6 | 2 | 6 |",
	}
	if len(rows) != len(want) {
		t.Fatalf("%d table rows, want %d:\n%s", len(rows), len(want), report)
	}
	for i, w := range want {
		if !strings.HasPrefix(rows[i], w) {
			t.Errorf("row %d = %s, want it to start %q", i, rows[i], w)
		}
		if !strings.HasSuffix(rows[i], "| 0 |") {
			t.Errorf("row %d has errors: %s", i, rows[i])
		}
	}
}

// TestPebbleRelativePath: `make bench` names Pebble by a path relative to
// the repository (bin/pebble), and Pebble runs in a directory of its own;
// the reference run must still start and issue.
func TestPebbleRelativePath(t *testing.T) {
	bin, err := pebble.Binary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(loadBin, "bench", "--bin", filepath.Dir(harness.Bin("hallmark")),
		"--pebble", filepath.Join(".", filepath.Base(bin)), "--targets", "pebble",
		"--concurrency", "2", "--count", "6", "--timeout", "60s")
	cmd.Dir = filepath.Dir(bin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hallmark-load bench --pebble ./%s from %s: %v\n%s", filepath.Base(bin), cmd.Dir, err, out)
	}
	if !regexp.MustCompile(`(?m)^\| pebble \(in memory\) \| 2 \| 6 \|.*\| 0 \|$`).MatchString(string(out)) {
		t.Errorf("no Pebble row with 6 issued and no error:\n%s", out)
	}
}
