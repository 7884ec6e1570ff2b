// Package e2e starts the real hallmark-frontend and hallmark-worker binaries
// on loopback, with a DNS server the test runs, and drives real ACME clients
// against them.
package e2e

import (
	"os"
	"testing"

	"github.com/hallmark-ca/hallmark/tests/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }

// CA is a running Hallmark: one frontend and one worker process.
type CA = harness.CA

var (
	requireTool = harness.RequireTool
	readCert    = harness.ReadCert
	// dialects are the stores every end-to-end test runs against.
	dialects = harness.Dialects
)

// startCA starts a CA on the store at dbURL; extra is further TOML tables
// (profiles, backends).
func startCA(t *testing.T, dbURL string, extra string) *CA {
	t.Helper()
	return harness.StartCA(t, dbURL, harness.Options{Tables: extra})
}
