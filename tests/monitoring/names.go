package monitoring

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// exportedNames are the series names a /metrics page in the text format
// declares: each family's name, and a histogram's or summary's _bucket,
// _sum and _count.
func exportedNames(r io.Reader) (map[string]bool, error) {
	names := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || f[0] != "#" || f[1] != "TYPE" {
			continue
		}
		names[f[2]] = true
		if f[3] == "histogram" || f[3] == "summary" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[f[2]+s] = true
			}
		}
	}
	return names, sc.Err()
}

// dashboardExprs are the PromQL expressions of every panel's targets.
func dashboardExprs(b []byte) ([]string, error) {
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("parsing the dashboard: %w", err)
	}
	var out []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			return nil, fmt.Errorf("panel %q has no query", p.Title)
		}
		for _, t := range p.Targets {
			out = append(out, t.Expr)
		}
	}
	return out, nil
}

var (
	quoted     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	matchers   = regexp.MustCompile(`\{[^}]*\}`)
	ranges     = regexp.MustCompile(`\[[^\]]*\]`)
	grouping   = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	identifier = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*\s*\(?`)
	keywords   = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true}
)

// metricNames are the metric names a PromQL expression selects: what is
// left once strings, label matchers, ranges and grouping clauses are
// removed, less functions (a name before "(") and the operators' keywords.
// It covers the PromQL the dashboard uses, not every PromQL there is.
func metricNames(expr string) []string {
	e := quoted.ReplaceAllString(expr, `""`)
	e = matchers.ReplaceAllString(e, " ")
	e = ranges.ReplaceAllString(e, " ")
	e = grouping.ReplaceAllString(e, " ")
	var out []string
	for _, m := range identifier.FindAllString(e, -1) {
		m = strings.TrimSpace(m)
		if strings.HasSuffix(m, "(") || keywords[strings.ToLower(m)] {
			continue
		}
		out = append(out, m)
	}
	return out
}

// hallmarkNames are the hallmark_ names anywhere in b (the alert rules:
// their expressions and the metrics their descriptions point to).
var hallmarkName = regexp.MustCompile(`\bhallmark_[a-z0-9_]+`)

func hallmarkNames(b []byte) []string {
	return hallmarkName.FindAllString(string(b), -1)
}
