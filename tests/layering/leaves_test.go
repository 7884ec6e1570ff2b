package layering

import (
	"slices"
	"strings"
	"testing"
)

// leaves are packages every binary (or every side of a boundary) links:
// they depend on the standard library alone and use no cgo, so linking one
// brings in nothing else of the module, no library and no C toolchain. The
// configuration leaves among them are what exempt lets through.
var leaves = []struct{ pkg, why string }{
	{"protocol/acme", "acme is the leaf vocabulary"},
	{"store/redact", "redact is linked by every binary"},
	{"protocol/profile", "the profile is shared by the frontend, the worker and the signer"},
	{"protocol/verdict", "the frontend's waiting requests, fed by the store through an interface (open.Verdicts)"},
	{"protocol/origin", "who asked rides from the frontend through jobs and the store to the worker"},
	{"jobs/notify", "[notify] and its events: every binary that writes an event routes it"},
	{"protocol/serverconf", "a configuration leaf every binary links"},
	{"admin/adminconf", "a configuration leaf every binary links: the worker and the CLI link no panel"},
	{"signer/signerconf", "a configuration leaf every binary links (exempt)"},
	{"worker/workerconf", "a configuration leaf every binary links (exempt)"},
}

// standard reports whether an import path is the standard library's: its
// first element has no dot (as goimports decides).
func standard(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// leafViolations returns "leaf -> dep: why" for every leaf that depends on
// a package outside the standard library (the module's included) or has
// cgo files of its own.
func leafViolations(pkgs map[string]pkg) []string {
	var bad []string
	for _, l := range leaves {
		p := pkgs[l.pkg]
		for _, d := range p.Deps {
			if !standard(d) {
				bad = append(bad, l.pkg+" -> "+d+": "+l.why+": standard library only")
			}
		}
		if len(p.CgoFiles) > 0 {
			bad = append(bad, l.pkg+" uses cgo ("+strings.Join(p.CgoFiles, ", ")+"): "+l.why+": no cgo")
		}
	}
	return bad
}

func TestLeavesAreLeaves(t *testing.T) {
	pkgs, err := listPackages()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range leafViolations(pkgs) {
		t.Error(v)
	}
	for _, l := range leaves {
		if _, ok := pkgs[l.pkg]; !ok {
			t.Errorf("leaf %s names no package of the module", l.pkg)
		}
	}
	// What exempt lets through must be a leaf, or the exemption would
	// carry the rest of a banned tree with it.
	for _, e := range exempt {
		if !slices.ContainsFunc(leaves, func(l struct{ pkg, why string }) bool { return module+"/"+l.pkg == e.to }) {
			t.Errorf("exempt lets %s link %s, which is not in leaves", e.from, e.to)
		}
	}
}

// TestLeafRulesCatchAViolation proves the check can fail: a configuration
// leaf that imports the module, a library, or C is reported.
func TestLeafRulesCatchAViolation(t *testing.T) {
	t.Parallel()
	pkgs := map[string]pkg{
		"signer/signerconf": {Deps: []string{"fmt", module + "/signer"}},
		"worker/workerconf": {Deps: []string{"net", "github.com/miekg/dns"}},
		"admin/adminconf":   {Deps: []string{"errors", "runtime/cgo"}, CgoFiles: []string{"c.go"}},
		"store/redact":      {Deps: []string{"crypto/internal/entropy/v1.0.0", "strings"}},
	}
	got := leafViolations(pkgs)
	want := []string{
		"admin/adminconf uses cgo (c.go)",
		"signer/signerconf -> " + module + "/signer",
		"worker/workerconf -> github.com/miekg/dns",
	}
	slices.Sort(got)
	if len(got) != len(want) {
		t.Fatalf("got %d violations, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w+":") {
			t.Errorf("violation %d is %q, want %q", i, got[i], w)
		}
	}
}
