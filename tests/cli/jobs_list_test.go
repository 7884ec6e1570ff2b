package cli

import (
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// TestJobsListRefusesUnknownFilters: a misspelt --kind or --state is a
// usage error (exit 2) naming what it accepts, not an empty list that
// looks like an idle queue; the known ones list.
func TestJobsListRefusesUnknownFilters(t *testing.T) {
	c := newCA(t, testdb.SQLite(t))
	for _, tc := range []struct {
		args []string
		code int
		say  string
	}{
		{[]string{"--kind", "signer_isue"}, 2, `--kind "signer_isue" is not a job kind`},
		{[]string{"--state", "done"}, 2, `--state "done" is not a job state`},
		{[]string{"--kind", "signer_issue", "--state", "running"}, 0, ""},
		{[]string{"--kind", "housekeeping", "--kind", "crl_generate"}, 0, ""},
	} {
		r := c.run(append([]string{"jobs", "list"}, tc.args...)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.say) {
			t.Errorf("jobs list %v: exit %d, stderr %q; want exit %d saying %q", tc.args, r.code, r.stderr, tc.code, tc.say)
		}
	}
}
