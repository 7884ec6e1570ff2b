package monitoring

import (
	"slices"
	"strings"
	"testing"
)

// TestMetricNamesCatchAnUnknownName shows the dashboard check can fail: a
// query naming a metric no binary exports is reported, and functions,
// labels and keywords are not taken for metrics.
func TestMetricNamesCatchAnUnknownName(t *testing.T) {
	exported, err := exportedNames(strings.NewReader("# HELP a_total x\n# TYPE a_total counter\na_total 1\n" +
		"# TYPE lat_seconds histogram\nlat_seconds_bucket{le=\"1\"} 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	expr := `histogram_quantile(0.9, sum by (le, kind) (rate(lat_seconds_bucket{kind="x"}[5m]))) / on (kind) sum(rate(a_total[1m])) and ignoring(x) hallmark_nonexistent_total > 0 unless time() - up`
	got := metricNames(expr)
	want := []string{"lat_seconds_bucket", "a_total", "hallmark_nonexistent_total", "up"}
	if !slices.Equal(got, want) {
		t.Fatalf("metricNames = %q, want %q", got, want)
	}
	var unknown []string
	for _, n := range got {
		if !exported[n] {
			unknown = append(unknown, n)
		}
	}
	if !slices.Equal(unknown, []string{"hallmark_nonexistent_total", "up"}) {
		t.Errorf("unknown names = %q", unknown)
	}
}
