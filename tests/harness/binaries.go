package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// binaries are the commands the harness runs, built from ./cmd/<name>.
var binaries = []string{"hallmark", "hallmark-frontend", "hallmark-worker"}

// binDir holds the binaries Build made (or HALLMARK_TEST_BIN_DIR names).
var binDir string

// Build builds the binaries once for this test binary into a temporary
// directory, or uses the prebuilt ones in HALLMARK_TEST_BIN_DIR (e.g. bin/
// after make build). The returned cleanup removes what it built.
func Build() (cleanup func(), err error) {
	if dir := os.Getenv("HALLMARK_TEST_BIN_DIR"); dir != "" {
		binDir = dir
		return func() {}, nil
	}
	dir, err := os.MkdirTemp("", "hallmark-test-bin-")
	if err != nil {
		return func() {}, err
	}
	binDir = dir
	cleanup = func() { os.RemoveAll(dir) }
	// One go build for all three: it builds them in parallel and writes
	// each into dir under its own name.
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, b := range binaries {
		args = append(args, "github.com/hallmark-ca/hallmark/cmd/"+b)
	}
	cmd := exec.Command("go", args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		cleanup()
		return func() {}, fmt.Errorf("building %v: %w", binaries, err)
	}
	return cleanup, nil
}

// Main is TestMain for a package that needs nothing but the binaries:
// os.Exit(harness.Main(m)).
func Main(m *testing.M) int {
	cleanup, err := Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	return m.Run()
}

// Bin is the path of one of the built binaries ("hallmark-worker").
func Bin(name string) string {
	if binDir == "" {
		panic("harness.Bin before harness.Build: call harness.Main or harness.Build from TestMain")
	}
	return filepath.Join(binDir, name)
}
