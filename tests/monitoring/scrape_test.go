package monitoring

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/tests/harness"
)

// scrape returns the /metrics page at u.
func scrape(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("scraping %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scraping %s: %d %v", u, resp.StatusCode, err)
	}
	return string(b)
}

// hasSeries reports whether page has a sample of name whose labels match
// labels (a regexp over the text between the braces) with a value > 0 when
// positive is set.
func hasSeries(page, name, labels string, positive bool) bool {
	sel := `\{[^}]*` + labels + `[^}]*\}`
	if labels == "" {
		sel = `(?:\{[^}]*\})?`
	}
	re := regexp.MustCompile(`(?m)^` + name + sel + ` (\S+)$`)
	for _, m := range re.FindAllStringSubmatch(page, -1) {
		if !positive || (m[1] != "0" && m[1] != "0.0") {
			return true
		}
	}
	return false
}

// TestScrapedMetrics starts a frontend and a worker, issues a certificate
// with lego, scrapes both /metrics pages, then stops the worker and starts
// an order whose validation job can only wait: the frontend's page shows
// it waiting. The series the alerts read are there under their names, and
// every metric the dashboard and the alerts name is one the binaries export.
func TestScrapedMetrics(t *testing.T) {
	for _, d := range harness.Dialects {
		t.Run(d.Name, func(t *testing.T) {
			bin := harness.RequireTool(t, "lego", "apt-get install lego")
			ca := harness.StartCA(t, d.URL(t), harness.Options{})
			l := harness.Lego{Bin: bin, Directory: ca.BaseURL + "/directory", Root: ca.Root, Email: "m@hallmark.test", Path: t.TempDir()}
			httpFlag := fmt.Sprintf("127.0.0.1:%d", ca.HTTPPort)
			if out, err := l.Run(context.Background(), "--domains", "www.metrics.test", "--http", "--http.port", httpFlag, "run"); err != nil {
				t.Fatalf("lego run: %v\n%s", err, out)
			}
			plain := &http.Client{Timeout: 5 * time.Second}
			worker := scrape(t, plain, "http://"+ca.Health+"/metrics")
			for _, s := range []struct{ name, labels string }{
				{"hallmark_jobs_total", `kind="signer_issue",outcome="completed"`},
				{"hallmark_jobs_total", `kind="challenge_validate",outcome="completed"`},
				{"hallmark_validations_total", `method="http-01",problem="",result="valid"`},
				{"hallmark_signing_duration_seconds_count", `backend="local"`},
				{"hallmark_crl_this_update_timestamp_seconds", `issuer="`},
				{"hallmark_crl_next_update_timestamp_seconds", `issuer="`},
				{"hallmark_root_crl_next_update_timestamp_seconds", `root="`},
				{"hallmark_worker_queue_subscribed", `queue="profile_`},
			} {
				if !hasSeries(worker, s.name, s.labels, true) {
					t.Errorf("the worker exports no %s{%s} above 0 after an issuance", s.name, s.labels)
				}
			}
			if !hasSeries(worker, "hallmark_jobs_total", `kind="challenge_validate",outcome="abandoned"`, false) {
				t.Errorf("the worker does not export the abandoned count at 0 before any abandon: an increase() over it is undefined")
			}

			// A stopped worker: the validation job waits, and the frontend
			// is what says so.
			ca.Stop("worker")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { _, _ = l.Run(ctx, "--domains", "wait.metrics.test", "--http", "--http.port", httpFlag, "run") }()
			frontend := waitFor(t, ca.HTTPClient(), ca.BaseURL+"/metrics", func(page string) bool {
				return hasSeries(page, "hallmark_jobs_waiting", `kind="challenge_validate",queue="validate",state="available"`, true)
			})
			if !hasSeries(frontend, "hallmark_jobs_oldest_seconds", `kind="challenge_validate",queue="validate",state="available"`, false) {
				t.Errorf("the frontend exports the waiting job but not its age")
			}
			if !hasSeries(frontend, "hallmark_jobs_depth_up", ``, true) {
				t.Errorf("hallmark_jobs_depth_up is not 1 on the frontend")
			}
			if !hasSeries(frontend, "hallmark_frontend_nonces_redeemed_total", ``, true) {
				t.Errorf("the frontend counted no nonce redeemed after lego's orders")
			}
			if !hasSeries(frontend, "hallmark_frontend_problems_total", `problem="badNonce"`, false) {
				t.Errorf("the frontend does not export its badNonce count")
			}
			cancel()
			checkNamesExported(t, worker, frontend)
		})
	}
}

// waitFor scrapes u until ok holds for the page (20 s at most).
func waitFor(t *testing.T, c *http.Client, u string, ok func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		page := scrape(t, c, u)
		if ok(page) {
			return page
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never showed a validation job waiting with the worker stopped:\n%s", u, harness.Tail(page, 4000))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkNamesExported fails on a metric the dashboard or the alerts name
// that neither page declares.
func checkNamesExported(t *testing.T, pages ...string) {
	t.Helper()
	exported := map[string]bool{}
	for _, p := range pages {
		names, err := exportedNames(strings.NewReader(p))
		if err != nil {
			t.Fatal(err)
		}
		for n := range names {
			exported[n] = true
		}
	}
	dash, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	exprs, err := dashboardExprs(dash)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range exprs {
		for _, n := range metricNames(e) {
			if !exported[n] {
				t.Errorf("the dashboard's query %q names %s, which neither binary exports", e, n)
			}
		}
	}
	rules, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range hallmarkNames(rules) {
		if !exported[n] {
			t.Errorf("alerts.yml names %s, which neither binary exports", n)
		}
	}
}
