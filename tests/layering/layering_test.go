// Package layering keeps Hallmark's trust boundaries as data and checks them
// against what the Go toolchain says each package really imports.
package layering

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

const module = "github.com/hallmark-ca/hallmark"

// never is policy. Do not relax it to fix a build: move the code instead.
// A rule's "to" ending in "/..." bans the package and everything below it.
var never = []struct{ from, to, why string }{
	{"cmd/hallmark-frontend", module + "/signer/...", "the internet-facing process never holds key material"},
	{"cmd/hallmark-frontend", "github.com/ThalesGroup/crypto11/...", "PKCS#11 stays in the worker"},
	{"cmd/hallmark-frontend", "github.com/ThalesIgnite/crypto11/...", "PKCS#11 stays in the worker (old import path)"},
	{"cmd/hallmark-frontend", "github.com/miekg/pkcs11/...", "PKCS#11 stays in the worker"},
	{"cmd/hallmark", module + "/signer/...", "the CLI never builds a signer; it enqueues work"},
	{"cmd/hallmark", "github.com/ThalesGroup/crypto11/...", "the CLI never touches the HSM"},
	{"cmd/hallmark", "github.com/ThalesIgnite/crypto11/...", "the CLI never touches the HSM"},
	{"cmd/hallmark", "github.com/miekg/pkcs11/...", "the CLI never touches the HSM"},
	{"cmd/hallmark", module + "/worker/...", "the CLI enqueues and records; it never runs a job's handler"},
	{"cmd/hallmark", module + "/protocol", "the CLI shares service packages (protocol/revocation, operator), not the HTTP frontend"},
	{"cmd/hallmark-worker", module + "/admin", "the worker serves no panel; it links [admin]'s leaf, admin/adminconf, only"},
	{"cmd/hallmark", module + "/admin", "the CLI shares the panel's actions (admin/operator), not the panel; [admin] is admin/adminconf"},
	{"admin", module + "/signer/...", "the admin panel runs inside the internet-facing frontend; it never holds key material"},
	{"admin", module + "/worker/...", "the admin panel queues and records; it never runs a job's handler"},
	{"admin/operator/...", module + "/signer/...", "operator actions queue work for a worker; they never sign"},
	{"admin/operator/...", module + "/worker/...", "operator actions queue work for a worker; they never do it"},
	{"protocol/...", module + "/signer/...", "the ACME frontend code never holds key material"},
	{"protocol/...", module + "/worker/...", "the frontend queues work; it never does it"},
	{"worker/validate/...", module + "/signer/...", "validation handles untrusted input; keep keys away"},
	{"jobs/...", module + "/store/...", "jobs is below the store: the store inserts and completes jobs"},
	{"jobs/...", module + "/protocol", "jobs knows job kinds, not the ACME frontend"},
	{"protocol/access/...", module + "/protocol", "the access policy is shared by the frontend and the CLI's explain: it never links the HTTP frontend"},
	{"protocol/access/...", module + "/store", "the access policy reads an account's binding through what the frontend or the CLI hands it, never the store"},
	{"cmd/hallmark-load", module + "/...", "the load generator is an outside ACME client: it measures the built binaries and links none of their code"},
	{"cmd/hallmark-frontend", module + "/worker/notifysend", "the frontend queues notifications; only the worker delivers them"},
}

// exempt are the imports a rule of never lets through: the configuration
// leaves of trees a binary may not link otherwise. Every binary checks the
// whole file (cmd/config), so it links each section's types and checks;
// these leaves hold nothing else (never keeps them leaves).
var exempt = []struct{ from, to, why string }{
	{"cmd/hallmark-frontend", module + "/signer/signerconf", "[ca] and [backends.*]: settings and their checks, no key material"},
	{"cmd/hallmark", module + "/signer/signerconf", "[ca] and [backends.*]: settings and their checks, no key material"},
	{"cmd/hallmark", module + "/worker/workerconf", "[worker] and [challenge]: settings and their checks, no job handler"},
}

// isExempt reports whether from may depend on dep despite never.
func isExempt(from, dep string) bool {
	for _, e := range exempt {
		if e.from == from && e.to == dep {
			return true
		}
	}
	return false
}

// pkg is one package as go list describes it: every package it depends
// on (Deps), and those it imports itself (Imports), from its tests too.
type pkg struct {
	ImportPath                string
	Deps, Imports, CgoFiles   []string
	TestImports, XTestImports []string
}

// listPackages runs `go list` over the module's packages once per test
// binary: by import path relative to the module.
var listPackages = sync.OnceValues(func() (map[string]pkg, error) {
	cmd := exec.Command("go", "list", "-json=ImportPath,Deps,Imports,CgoFiles,TestImports,XTestImports", module+"/...")
	cmd.Dir = "../.."
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go list: %v\n%s", err, errb.String())
	}
	pkgs := map[string]pkg{}
	for dec := json.NewDecoder(&out); dec.More(); {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("decoding go list output: %w", err)
		}
		pkgs[strings.TrimPrefix(p.ImportPath, module+"/")] = p
	}
	return pkgs, nil
})

// listDeps is, for every package of the module, the full set of packages
// it depends on.
func listDeps(t *testing.T) map[string][]string {
	t.Helper()
	pkgs, err := listPackages()
	if err != nil {
		t.Fatal(err)
	}
	deps := map[string][]string{}
	for path, p := range pkgs {
		deps[path] = p.Deps
	}
	return deps
}

// matches reports whether path is pattern, or below it when pattern ends in "/...".
func matches(pattern, path string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

// violations returns "from -> dep: why" for every broken rule.
func violations(deps map[string][]string) []string {
	var bad []string
	for _, r := range never {
		for from, ds := range deps {
			if !matches(r.from, from) {
				continue
			}
			for _, d := range ds {
				if matches(r.to, d) && d != module+"/"+from && !isExempt(from, d) {
					bad = append(bad, from+" -> "+d+": "+r.why)
				}
			}
		}
	}
	return bad
}

func TestLayering(t *testing.T) {
	deps := listDeps(t)
	for _, v := range violations(deps) {
		t.Error(v)
	}
}

// TestRulesNameRealPackages keeps the rules honest: a rule whose "from" names
// no package (a rename, a typo) would silently check nothing.
func TestRulesNameRealPackages(t *testing.T) {
	deps := listDeps(t)
	for _, r := range never {
		found := false
		for from := range deps {
			if matches(r.from, from) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("rule %s -> %s names no package of the module", r.from, r.to)
		}
	}
	for _, must := range []string{"cmd/hallmark-frontend", "cmd/hallmark-worker", "cmd/hallmark", "signer"} {
		if _, ok := deps[must]; !ok {
			t.Errorf("package %s is missing; the layering rules assume it exists", must)
		}
	}
}

// TestRulesCatchABannedImport proves the check can fail: a frontend that
// pulled in the signer or crypto11 is reported.
func TestRulesCatchABannedImport(t *testing.T) {
	t.Parallel()
	fake := map[string][]string{
		"cmd/hallmark-frontend": {"net/http", module + "/signer/pkcs11", "github.com/ThalesGroup/crypto11"},
		"cmd/hallmark":          {module + "/signer"},
		"worker/validate":       {"github.com/miekg/dns"},
		"cmd/hallmark-load":     {module + "/protocol/acme"},
		// The frontend and the CLI link the configuration leaves only.
		"admin":               {module + "/signer/signerconf"},
		"cmd/hallmark-worker": {module + "/admin/adminconf", module + "/admin"},
	}
	fake["cmd/hallmark"] = append(fake["cmd/hallmark"], module+"/signer/signerconf", module+"/worker/workerconf", module+"/admin/operator")
	got := violations(fake)
	if len(got) != 6 {
		t.Fatalf("want 6 violations (frontend→signer, frontend→crypto11, cli→signer, load→acme, admin→signerconf, worker→admin), got %d: %v", len(got), got)
	}
}
