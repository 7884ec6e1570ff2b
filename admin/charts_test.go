package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// TestOverviewCharts: the overview draws the last 24 hours as inline SVG
// charts, each with its title and description, and bars counting what the
// store holds: three certificates issued, three validations passed and two
// failed in the current hour, and the queue's waiting jobs now.
func TestOverviewCharts(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			srv, st := panelOn(t, kind)
			for i := range 3 {
				issuedCert(t, st, fmt.Sprintf("c4a%d", i), fmt.Sprintf("chart%d.example.com", i), "issuer-1", "default")
			}
			for i := range 2 {
				failValidation(t, st, fmt.Sprintf("fail%d", i))
			}
			depth, err := st.QueueDepth(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var available int64
			for _, r := range depth.Rows {
				if r.State == "available" {
					available += r.Count
				}
			}
			resp, page := do(t, &http.Client{CheckRedirect: noRedirect}, "GET", srv.URL+"/", "Bearer "+token, nil)
			if resp.StatusCode != 200 {
				t.Fatalf("overview: %d\n%s", resp.StatusCode, page)
			}
			if strings.Contains(page, "<script") {
				t.Fatal("the overview has a script; the panel's CSP refuses them")
			}
			for id, want := range map[string]string{
				"issued":      "issued=3",
				"validations": "valid=3 invalid=2",
				"jobs":        "",
				"queue":       fmt.Sprintf("queued=%d", available),
			} {
				svg := chartSVG(t, page, id)
				if got := bars(svg); got != want {
					t.Errorf("chart %s bars %q, want %q\n%s", id, got, want, svg)
				}
				if !regexp.MustCompile(`<title id="chart-` + id + `-title">[^<]+</title>\s*<desc id="chart-` + id + `-desc">[^<]+</desc>`).MatchString(svg) {
					t.Errorf("chart %s lacks its accessible title and description:\n%s", id, svg)
				}
			}
			if svg := chartSVG(t, page, "validations"); !strings.Contains(svg, "3 valid, 2 invalid") {
				t.Errorf("the validations chart's description does not sum its hours:\n%s", svg)
			}
		})
	}
}

var (
	barRE   = regexp.MustCompile(`<rect class="bar ([a-z]+)"[^>]*? data-count="(\d+)"`)
	chartRE = regexp.MustCompile(`(?s)<svg [^>]*id="chart-([a-z]+)".*?</svg>`)
)

// chartSVG is the overview's chart id.
func chartSVG(t *testing.T, page, id string) string {
	t.Helper()
	for _, m := range chartRE.FindAllStringSubmatch(page, -1) {
		if m[1] == id {
			return m[0]
		}
	}
	t.Fatalf("the overview has no chart %q:\n%s", id, page)
	return ""
}

// bars lists an SVG's bars as "class=count", in order.
func bars(svg string) string {
	var out []string
	for _, m := range barRE.FindAllStringSubmatch(svg, -1) {
		out = append(out, m[1]+"="+m[2])
	}
	return strings.Join(out, " ")
}

// failValidation records a failed validation of a new order's challenge,
// with its trail event, as the worker does.
func failValidation(t *testing.T, st store.Store, seed string) {
	t.Helper()
	ctx := context.Background()
	o := pendingOrder(t, st, seed, seed+".example.com")
	ch := claim(t, st, o)
	ev := store.AuditEvent{Actor: "worker", Action: store.ActionValidationFailed, Subject: ch, Trail: true}
	if err := st.ChallengeVerdict(ctx, store.Verdict{ChallengeID: ch, Status: acme.StatusInvalid,
		Error: &acme.Problem{Type: acme.ProblemIncorrectResponse, Detail: "no"}, Trail: &ev}); err != nil {
		t.Fatal(err)
	}
}
