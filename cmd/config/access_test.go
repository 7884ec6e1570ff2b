package config_test

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestAccessSection: [access] is decoded strictly into its owner's type and
// checked by it (an unknown kind names its key), alongside the checks
// across sections: a profile an identifiers check names must exist, and a
// check's time budget must be shorter than the request's.
func TestAccessSection(t *testing.T) {
	t.Parallel()
	_, err := load(t, `
[access]
mode = "enforce"
[access.checks.geo]
kind = "geoip"
[access.checks.names]
kind = "identifiers"
allow = ["*.corp.example"]
profiles = ["nosuch"]
[access.checks.cmdb]
kind = "hook"
command = ["./may-ask"]
timeout_ms = 20000
[[access.rules]]
when = "names and cmdb"
action = "allow"
`)
	for _, want := range []string{
		`access.checks.geo.kind: unknown kind "geoip"`,
		`access.checks.names.profiles: "nosuch" is not a configured profile`,
		`access.checks.cmdb.timeout_ms: must be shorter than server.request_timeout_ms (10000)`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in %v", want, err)
		}
	}
	if _, err := load(t, "[access.checks.x]\nkind = \"cidr\"\nrange = [\"10.0.0.0/8\"]\n"); err == nil || !strings.Contains(err.Error(), "access.checks.x.range") {
		t.Errorf("a misspelt key: %v, want an unknown key error naming it", err)
	}

	c, err := load(t, `
[access]
default = "deny"
[access.checks.cmdb]
kind = "hook"
command = ["hooks/may-ask", "--strict"]
[access.checks.onpath]
kind = "hook"
command = ["may-ask"]
[[access.rules]]
when = "cmdb and onpath"
action = "allow"
`)
	if err != nil {
		t.Fatal(err)
	}
	// A hook's relative path is relative to the file, as every path in it.
	if got := c.Access.Checks["cmdb"].Command; !filepath.IsAbs(got[0]) || !strings.HasSuffix(got[0], "/hooks/may-ask") || got[1] != "--strict" {
		t.Errorf("hook command %v, want hooks/may-ask next to the file", got)
	}
	if got := c.Access.Checks["onpath"].Command[0]; got != "may-ask" {
		t.Errorf("a bare program name became %q", got)
	}
}
