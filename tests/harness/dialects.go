package harness

import (
	"testing"

	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// Dialect is a store a test runs against: URL creates a fresh database
// (or skips, or fails in CI, as tests/testdb decides) and returns its URL.
type Dialect struct {
	Name string
	URL  func(t *testing.T) string
}

// Dialects are the stores every end-to-end test runs against.
var Dialects = []Dialect{
	{"sqlite", func(t *testing.T) string { return testdb.SQLite(t) }},
	{"postgres", func(t *testing.T) string { return testdb.Postgres(t) }},
}
