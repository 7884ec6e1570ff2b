package layering

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docs/architecture.md's package table and import diagram are checked
// against go list here, so the map stays true to the code.

const archDoc = "../../docs/architecture.md"

// archRow is one row of the package table: its packages (first cell) and
// the module's packages they may import (third cell).
type archRow struct {
	pkgs, allowed []string
}

var backticked = regexp.MustCompile("`([^`\n]+)`")

func ticks(cell string) []string {
	var out []string
	for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

// archRows reads the table under "## Packages".
func archRows(md string) []archRow {
	_, sec, _ := strings.Cut(md, "\n## Packages\n")
	sec, _, _ = strings.Cut(sec, "\n## ")
	var rows []archRow
	for _, line := range strings.Split(sec, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) != 3 {
			continue
		}
		rows = append(rows, archRow{pkgs: ticks(cells[0]), allowed: ticks(cells[2])})
	}
	return rows
}

// tableViolations checks the rows against pkgs: every package has one row,
// every name is a package, and every package's direct imports of the
// module (tests aside) are among its row's.
func tableViolations(rows []archRow, pkgs map[string]pkg) []string {
	var bad []string
	seen := map[string]bool{}
	for _, r := range rows {
		for _, name := range slices.Concat(r.pkgs, r.allowed) {
			if _, ok := pkgs[strings.TrimSuffix(name, "/...")]; !ok {
				bad = append(bad, fmt.Sprintf("%s is named in the table and is no package of the module", name))
			}
		}
		for _, p := range r.pkgs {
			if seen[p] {
				bad = append(bad, p+" has two rows")
			}
			seen[p] = true
			for _, imp := range pkgs[p].Imports {
				rel, ok := strings.CutPrefix(imp, module+"/")
				if ok && !slices.ContainsFunc(r.allowed, func(a string) bool { return matches(a, rel) }) {
					bad = append(bad, fmt.Sprintf("%s imports %s, which its row does not list", p, rel))
				}
			}
		}
	}
	for p := range pkgs {
		if !seen[p] {
			bad = append(bad, p+" has no row in the table")
		}
	}
	slices.Sort(bad)
	return bad
}

// diagramEdges are the edges ("from -> to", by package) of the mermaid
// block.
func diagramEdges(md string) []string {
	_, block, _ := strings.Cut(md, "```mermaid\n")
	block, _, _ = strings.Cut(block, "```")
	node := regexp.MustCompile(`^\s*(\w+)\["([^"]+)"\]$`)
	edge := regexp.MustCompile(`^\s*(\w+) --> (\w+)$`)
	names := map[string]string{}
	var edges []string
	for _, line := range strings.Split(block, "\n") {
		if m := node.FindStringSubmatch(line); m != nil {
			names[m[1]] = m[2]
		} else if m := edge.FindStringSubmatch(line); m != nil {
			edges = append(edges, names[m[1]]+" -> "+names[m[2]])
		}
	}
	slices.Sort(edges)
	return edges
}

// importGraph is each package's direct imports of the module, tests aside,
// for the packages outside tests/.
func importGraph(pkgs map[string]pkg) map[string][]string {
	g := map[string][]string{}
	for p, info := range pkgs {
		if matches("tests/...", p) {
			continue
		}
		g[p] = []string{}
		for _, imp := range info.Imports {
			if rel, ok := strings.CutPrefix(imp, module+"/"); ok {
				g[p] = append(g[p], rel)
			}
		}
	}
	return g
}

// reduced is g's transitive reduction: an edge only where no longer path
// joins its ends (the graph has no cycles: Go forbids them).
func reduced(g map[string][]string) []string {
	var reach func(from string, seen map[string]bool)
	reach = func(from string, seen map[string]bool) {
		for _, to := range g[from] {
			if !seen[to] {
				seen[to] = true
				reach(to, seen)
			}
		}
	}
	var edges []string
	for from, tos := range g {
		via := map[string]bool{}
		for _, mid := range tos {
			reach(mid, via)
		}
		for _, to := range tos {
			if !via[to] {
				edges = append(edges, from+" -> "+to)
			}
		}
	}
	slices.Sort(edges)
	return edges
}

// diagram renders the mermaid block for g as docs/architecture.md holds it.
func diagram(g map[string][]string) string {
	id := strings.NewReplacer("/", "_", "-", "_").Replace
	groups := []struct{ id, title, prefix string }{
		{"g_cmd", "binaries", "cmd"}, {"g_admin", "panel", "admin"}, {"g_protocol", "frontend", "protocol"},
		{"g_worker", "worker and signer", "signer worker"}, {"g_store", "store and queue", "jobs migrations store"},
	}
	pkgs := slices.Sorted(func(yield func(string) bool) {
		for p := range g {
			if !yield(p) {
				return
			}
		}
	})
	var b strings.Builder
	b.WriteString("```mermaid\nflowchart TD\n")
	for _, gr := range groups {
		fmt.Fprintf(&b, "  subgraph %s [%s]\n", gr.id, gr.title)
		for _, p := range pkgs {
			top, _, _ := strings.Cut(p, "/")
			if slices.Contains(strings.Fields(gr.prefix), top) {
				fmt.Fprintf(&b, "    %s[%q]\n", id(p), p)
			}
		}
		b.WriteString("  end\n")
	}
	for _, e := range reduced(g) {
		from, to, _ := strings.Cut(e, " -> ")
		fmt.Fprintf(&b, "  %s --> %s\n", id(from), id(to))
	}
	b.WriteString("```\n")
	return b.String()
}

func readArchDoc(t *testing.T) (string, map[string]pkg) {
	t.Helper()
	md, err := os.ReadFile(archDoc)
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := listPackages()
	if err != nil {
		t.Fatal(err)
	}
	return string(md), pkgs
}

func TestArchitectureTable(t *testing.T) {
	md, pkgs := readArchDoc(t)
	for _, v := range tableViolations(archRows(md), pkgs) {
		t.Error("docs/architecture.md: " + v)
	}
}

func TestArchitectureDiagram(t *testing.T) {
	md, pkgs := readArchDoc(t)
	g := importGraph(pkgs)
	if got, want := diagramEdges(md), reduced(g); !slices.Equal(got, want) {
		t.Errorf("docs/architecture.md's diagram is not go list's imports; replace its mermaid block with:\n%s", diagram(g))
	}
}

// TestArchitectureNamesExist: every path of the repository the page names
// in backticks (a package, a folder, a file) exists.
func TestArchitectureNamesExist(t *testing.T) {
	md, _ := readArchDoc(t)
	md = regexp.MustCompile("(?s)```.*?```").ReplaceAllString(md, "")
	path := regexp.MustCompile(`^(admin|cmd|deploy|docs|jobs|migrations|protocol|signer|store|tests|worker)(/[\w.<>-]+)*(/\.\.\.|/)?$`)
	for _, name := range ticks(md) {
		if !path.MatchString(name) || strings.Contains(name, "<") {
			continue
		}
		p := strings.TrimSuffix(strings.TrimSuffix(name, "/..."), "/")
		if _, err := os.Stat(filepath.Join("../..", p)); err != nil {
			t.Errorf("docs/architecture.md names %s, which does not exist", name)
		}
	}
}

// TestArchitectureChecksCatchAViolation proves the checks can fail: an
// import the row does not list, a package with no row, a name that is no
// package, and a diagram missing an edge are each reported.
func TestArchitectureChecksCatchAViolation(t *testing.T) {
	t.Parallel()
	pkgs := map[string]pkg{
		"jobs":          {Imports: []string{"context", module + "/protocol/acme"}},
		"protocol/acme": {},
		"store":         {Imports: []string{module + "/jobs", module + "/protocol/acme"}},
	}
	rows := []archRow{{pkgs: []string{"jobs"}}, {pkgs: []string{"protocol/acme"}, allowed: []string{"protocol/nope"}}}
	got := tableViolations(rows, pkgs)
	want := []string{
		"jobs imports protocol/acme, which its row does not list",
		"protocol/nope is named in the table and is no package of the module",
		"store has no row in the table",
	}
	if !slices.Equal(got, want) {
		t.Errorf("table violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	g := importGraph(pkgs)
	if e := reduced(g); !slices.Equal(e, []string{"jobs -> protocol/acme", "store -> jobs"}) {
		t.Errorf("reduced = %v: store -> protocol/acme is implied through jobs", e)
	}
	md := "```mermaid\n  jobs[\"jobs\"]\n  store[\"store\"]\n  store --> jobs\n```\n"
	if slices.Equal(diagramEdges(md), reduced(g)) {
		t.Error("a diagram missing jobs -> protocol/acme passed")
	}
	if got := diagramEdges(diagram(g)); !slices.Equal(got, reduced(g)) {
		t.Errorf("the rendered diagram reads back as %v", got)
	}
}
