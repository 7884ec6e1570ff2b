package admin_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/protocol/origin"
	"github.com/hallmark-ca/hallmark/store"
)

// TestAuditShowsTheTrail: the audit page shows the issuance trail with
// each event's client, user agent and request, and narrows to the trail,
// an action, a request or a date.
func TestAuditShowsTheTrail(t *testing.T) {
	t.Parallel()
	srv, st := panel(t)
	ctx := context.Background()
	for _, ev := range []store.AuditEvent{
		{Actor: "cli:alice", Action: "revoke", Subject: "operator-subject"},
		{Actor: "acme:acct1", Action: store.ActionCertificateIssued, Subject: "c0ffee", Trail: true,
			Origin: origin.Origin{RequestID: "rid-panel-1", ClientAddr: "192.0.2.80", PTR: "build.corp.example", UserAgent: "certbot/2.11 <b>"}},
	} {
		if err := st.AuditRecord(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	c := &http.Client{CheckRedirect: noRedirect}
	for _, tc := range []struct {
		query      string
		show, hide []string
	}{
		{"", []string{"operator-subject", "c0ffee", "192.0.2.80 (build.corp.example)", "certbot/2.11 &lt;b&gt;", "rid-panel-1"}, nil},
		{"?kind=trail", []string{"c0ffee"}, []string{"operator-subject"}},
		{"?kind=operator", []string{"operator-subject"}, []string{"c0ffee"}},
		{"?kind=certificate.issued", []string{"c0ffee"}, []string{"operator-subject"}},
		{"?request=rid-panel-1", []string{"c0ffee"}, []string{"operator-subject"}},
		{"?since=2999-01-01", nil, []string{"c0ffee", "operator-subject"}},
	} {
		resp, body := do(t, c, "GET", srv.URL+"/audit"+tc.query, "Bearer "+token, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /audit%s: %d\n%s", tc.query, resp.StatusCode, body)
		}
		for _, s := range tc.show {
			if !strings.Contains(body, s) {
				t.Errorf("/audit%s does not show %q", tc.query, s)
			}
		}
		for _, s := range tc.hide {
			if strings.Contains(body, s) {
				t.Errorf("/audit%s shows %q", tc.query, s)
			}
		}
	}
	if resp, _ := do(t, c, "GET", srv.URL+"/audit?since=yesterday", "Bearer "+token, nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a since that is no date: %d, want 400", resp.StatusCode)
	}
}
