package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/tests/harness"
)

// trailRow is a row of `hallmark audit list --json`.
type trailRow struct {
	Action     string `json:"action"`
	Subject    string `json:"subject"`
	Detail     string `json:"detail"`
	Trail      bool   `json:"trail"`
	RequestID  string `json:"request_id"`
	ClientAddr string `json:"client_addr"`
	UserAgent  string `json:"user_agent"`
}

// TestIssuanceTrail: lego asks for a name the policy refuses, then for one
// it allows. The refused newOrder and the issued certificate each leave
// one trail event with the client's address, lego's user agent and the
// request's id; the id is on the frontend's log line of the refusal and
// on the worker's line of the issuance, and `hallmark audit list` shows
// both. A trusted proxy's X-Request-Id is kept; anyone else's is not.
func TestIssuanceTrail(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.Name, func(t *testing.T) {
			requireTool(t, "lego", "apt-get install lego")
			ca := harness.StartCA(t, d.URL(t), harness.Options{Env: []string{"HALLMARK_DEBUG=1"},
				Server: `request_id_trusted_proxies = ["127.0.0.2/32"]`,
				Tables: "[policy]\ndeny_domains = [\"denied.e2e.test\"]\n"})
			path := t.TempDir()
			http01 := []string{"--http", "--http.port", fmt.Sprintf("127.0.0.1:%d", ca.HTTPPort), "run"}
			if out, err := lego(t, ca, path, append([]string{"--domains", "www.denied.e2e.test"}, http01...)...); err == nil {
				t.Fatalf("lego got a certificate for a denied name:\n%s", out)
			}
			name := "trail-" + d.Name + ".e2e.test"
			if out, err := lego(t, ca, path, append([]string{"--domains", name}, http01...)...); err != nil {
				t.Fatalf("lego run: %v\n%s", err, out)
			}

			var rows []trailRow
			out := ca.Run("hallmark", "--config", ca.Config, "audit", "list", "--kind", "trail", "--since", "1h", "--json")
			if err := json.Unmarshal([]byte(out), &rows); err != nil {
				t.Fatalf("audit list --json: %v\n%s", err, out)
			}
			refused := oneTrail(t, rows, "order.refused", "www.denied.e2e.test")
			issued := oneTrail(t, rows, "certificate.issued", name)
			oneTrail(t, rows, "account.created", "")
			if refused.RequestID == issued.RequestID {
				t.Errorf("the refusal and the issuance share request id %s", issued.RequestID)
			}
			if !logHas(ca.Log("frontend"), "acme request refused", "request_id="+refused.RequestID) {
				t.Errorf("no frontend log line of the refusal has request_id=%s:\n%s", refused.RequestID, ca.Log("frontend"))
			}
			if !logHas(ca.Log("worker"), "certificate issued", "request_id="+issued.RequestID) {
				t.Errorf("no worker log line of the issuance has request_id=%s:\n%s", issued.RequestID, ca.Log("worker"))
			}
			table := ca.Run("hallmark", "--config", ca.Config, "audit", "list", "--kind", "certificate.issued")
			if !strings.Contains(table, issued.RequestID) || !strings.Contains(table, "127.0.0.1") || strings.Contains(table, refused.RequestID) {
				t.Errorf("audit list --kind certificate.issued:\n%s", table)
			}

			for _, tc := range []struct {
				from string
				kept bool
			}{{"127.0.0.2", true}, {"127.0.0.1", false}} {
				got := requestIDFrom(t, ca, tc.from, "e2e-proxy-id-7")
				if (got == "e2e-proxy-id-7") != tc.kept || got == "" {
					t.Errorf("from %s: X-Request-Id %q; the proxy's id kept: want %v", tc.from, got, tc.kept)
				}
			}
		})
	}
}

// oneTrail is the one trail row of action whose detail names what (any,
// when empty), from lego on loopback.
func oneTrail(t *testing.T, rows []trailRow, action, what string) trailRow {
	t.Helper()
	var found []trailRow
	for _, r := range rows {
		if r.Action == action && strings.Contains(r.Detail, what) {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s trail rows naming %q, want 1: %+v", len(found), action, what, rows)
	}
	r := found[0]
	if !r.Trail || r.ClientAddr != "127.0.0.1" || r.RequestID == "" || !strings.Contains(strings.ToLower(r.UserAgent), "lego") {
		t.Errorf("%s row %+v: want lego's user agent from 127.0.0.1 with a request id", action, r)
	}
	return r
}

// logHas reports whether a line of log has every one of parts.
func logHas(log string, parts ...string) bool {
	for _, line := range strings.Split(log, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// requestIDFrom is the X-Request-Id the frontend answers a directory
// request with that comes from the loopback address from and names id.
func requestIDFrom(t *testing.T, ca *CA, from, id string) string {
	t.Helper()
	c := ca.HTTPClient()
	tr := c.Transport.(*http.Transport)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	tr.DialContext = d.DialContext
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, ca.BaseURL+"/directory", nil)
	req.Header.Set("X-Request-Id", id)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.Header.Get("X-Request-Id")
}
