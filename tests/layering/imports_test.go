package layering

import (
	"slices"
	"strings"
	"testing"
)

// within are trees only their own packages may import directly, tests
// included: a package elsewhere that imports one is a violation.
var within = []struct{ tree, why string }{
	{"cmd/...", "cmd/ holds the binaries and their plumbing: a library package takes its own configuration, which the binaries build from the file (cmd/config)"},
}

// homes are, for each library, the only packages of the module that may
// import it directly (go list's Imports, not Deps: others reach it through
// a home). They are today's importers; a new one is a decision, not a fix.
// Tests are not held to it.
var homes = []struct {
	lib   string
	homes []string
	why   string
}{
	{"github.com/go-jose/go-jose/v4/...", []string{"protocol", "protocol/jws", "cmd/hallmark-load"},
		"JWS is parsed and checked in protocol/jws; the load generator signs as a client does"},
	{"github.com/jackc/pgx/v5/...", []string{"store/postgres", "store/open", "jobs", "tests/testdb", "cmd/hallmark-load"},
		"PostgreSQL is the store's and the job queue's; the load generator and tests/testdb make databases"},
	{"github.com/riverqueue/river/...", []string{"jobs", "store/sqlstore", "worker"},
		"River is the job queue's (jobs); the store completes jobs in its transactions and the worker schedules its periodic jobs"},
	{"github.com/miekg/dns/...", []string{"worker/validate", "protocol/access/rdns", "signer/relay", "cmd/hallmark", "tests/testdns", "tests/signeddns", "cmd/hallmark-load"},
		"DNS lookups on a client's behalf are validation's (worker/validate); the access policy's reverse DNS of a client is protocol/access/rdns's; the relay publishes its upstream's dns-01 records (TSIG-signed updates); the CLI's dev DNS and the test servers answer"},
	{"github.com/ThalesGroup/crypto11/...", []string{"signer/pkcs11"}, "PKCS#11 needs cgo and holds the CA key: signer/pkcs11 only"},
	{"github.com/zmap/zlint/v3/...", []string{"signer"}, "lint-before-sign is the signer's"},
	{"modernc.org/sqlite/...", []string{"store/sqlite"}, "the SQLite driver is store/sqlite's"},
	{"github.com/coreos/go-oidc/v3/...", []string{"admin"}, "OpenID Connect sign-in is the panel's ([admin.oidc], admin/oidc.go)"},
	{"golang.org/x/oauth2/...", []string{"admin"}, "the authorization code flow is the panel's OpenID Connect sign-in"},
	{"github.com/zitadel/oidc/v3/...", []string{"tests/oidcop"}, "zitadel's OpenID provider is the tests' (tests/oidcop, a real provider to sign in at), never a binary's"},
}

// directViolations returns "from -> import: why" for every package that
// imports a tree of within from outside it, or a library outside its
// homes. imports are the module's packages' direct imports; testImports
// their tests' too.
func directViolations(imports, testImports map[string][]string) []string {
	var bad []string
	for _, w := range within {
		for from, is := range imports {
			for _, i := range slices.Concat(is, testImports[from]) {
				if matches(module+"/"+w.tree, i) && !matches(w.tree, from) {
					bad = append(bad, from+" -> "+i+": "+w.why)
				}
			}
		}
	}
	for _, h := range homes {
		for from, is := range imports {
			for _, i := range is {
				if matches(h.lib, i) && !slices.Contains(h.homes, from) {
					bad = append(bad, from+" -> "+i+": "+h.why)
				}
			}
		}
	}
	slices.Sort(bad)
	return slices.Compact(bad)
}

// listImports is every package's direct imports, and its tests'.
func listImports(t *testing.T) (imports, testImports map[string][]string) {
	t.Helper()
	pkgs, err := listPackages()
	if err != nil {
		t.Fatal(err)
	}
	imports, testImports = map[string][]string{}, map[string][]string{}
	for path, p := range pkgs {
		imports[path] = p.Imports
		testImports[path] = slices.Concat(p.TestImports, p.XTestImports)
	}
	return imports, testImports
}

func TestDirectImports(t *testing.T) {
	imports, testImports := listImports(t)
	for _, v := range directViolations(imports, testImports) {
		t.Error(v)
	}
	// Each library still has its homes, so a rule checks something.
	for _, h := range homes {
		for _, home := range h.homes {
			if !slices.ContainsFunc(imports[home], func(i string) bool { return matches(h.lib, i) }) {
				t.Errorf("%s no longer imports %s: take it off the library's homes", home, h.lib)
			}
		}
	}
}

// TestDirectRulesCatchAViolation proves the checks can fail: a library
// package (or its test) importing cmd/config, and a library imported
// outside its homes, are reported; the homes and cmd/ itself are not.
func TestDirectRulesCatchAViolation(t *testing.T) {
	t.Parallel()
	imports := map[string][]string{
		"cmd/hallmark-frontend": {module + "/cmd/config", module + "/protocol"},
		"protocol":              {"github.com/go-jose/go-jose/v4", module + "/cmd/config"},
		"admin":                 {"github.com/jackc/pgx/v5/pgxpool", "github.com/zitadel/oidc/v3/pkg/op"},
		"store/postgres":        {"github.com/jackc/pgx/v5/pgxpool"},
		"worker":                {"github.com/riverqueue/river"},
		"signer":                {},
	}
	testImports := map[string][]string{
		"cmd/hallmark-frontend": {module + "/cmd/config"},
		"protocol":              {},
		"admin":                 {},
		"store/postgres":        {},
		"worker":                {},
		"signer":                {module + "/cmd/internal/process", "github.com/jackc/pgx/v5"},
	}
	got := directViolations(imports, testImports)
	want := []string{"admin -> github.com/jackc/pgx/v5/pgxpool", "admin -> github.com/zitadel/oidc/v3/pkg/op", "protocol -> " + module + "/cmd/config", "signer -> " + module + "/cmd/internal/process"}
	if len(got) != len(want) {
		t.Fatalf("got %d violations, want %d (%v):\n%s", len(got), len(want), want, strings.Join(got, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w+":") {
			t.Errorf("violation %d is %q, want %q", i, got[i], w)
		}
	}
}
