package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/origin"
	"github.com/hallmark-ca/hallmark/store"
)

// TestAuditList: `hallmark audit list` filters the audit log by kind,
// since and request, prints each trail event's client, and refuses
// filters it cannot read with exit 2.
func TestAuditList(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			c := newCA(t, d.url(t))
			ctx := context.Background()
			old := time.Now().Add(-72 * time.Hour)
			for _, ev := range []store.AuditEvent{
				{Actor: "cli:alice", Action: "revoke", Subject: "op-1"},
				{Actor: "acme:a1", Action: store.ActionOrderRefused, Subject: "", Detail: "rejectedIdentifier", Trail: true, At: old,
					Origin: origin.Origin{RequestID: "rid-old", ClientAddr: "192.0.2.5", UserAgent: "certbot/2.11"}},
				{Actor: "acme:a1", Action: store.ActionCertificateIssued, Subject: "c0ffee", Trail: true,
					Origin: origin.Origin{RequestID: "rid-new", ClientAddr: "2001:db8::5", PTR: "build.corp.example", UserAgent: "lego/4.25"}},
			} {
				if err := c.st().AuditRecord(ctx, ev); err != nil {
					t.Fatal(err)
				}
			}
			for _, tc := range []struct {
				args []string
				want []string // request ids, or the operator's subject
			}{
				{nil, []string{"rid-new", "rid-old", "op-1"}},
				{[]string{"--kind", "trail"}, []string{"rid-new", "rid-old"}},
				{[]string{"--kind", "operator"}, []string{"op-1"}},
				{[]string{"--kind", "order.refused"}, []string{"rid-old"}},
				{[]string{"--since", "24h"}, []string{"rid-new", "op-1"}},
				{[]string{"--since", "7d", "--kind", "trail"}, []string{"rid-new", "rid-old"}},
				{[]string{"--request-id", "rid-new"}, []string{"rid-new"}},
			} {
				var rows []struct {
					Subject   string `json:"subject"`
					RequestID string `json:"request_id"`
				}
				c.jsonOf(&rows, 0, append([]string{"audit", "list", "--json"}, tc.args...)...)
				var got []string
				for _, r := range rows {
					if r.RequestID != "" {
						got = append(got, r.RequestID)
					} else {
						got = append(got, r.Subject)
					}
				}
				if strings.Join(got, " ") != strings.Join(tc.want, " ") {
					t.Errorf("audit list %v = %v, want %v", tc.args, got, tc.want)
				}
			}
			r := c.want(0, "audit", "list", "--kind", "trail")
			for _, s := range []string{"2001:db8::5 (build.corp.example)", "lego/4.25", "rid-new", "certbot/2.11", "CLIENT"} {
				if !strings.Contains(r.stdout, s) {
					t.Errorf("audit list table lacks %q:\n%s", s, r.stdout)
				}
			}
			c.want(2, "audit", "list", "--since", "yesterday")
			c.want(2, "audit", "list", "--kind", "a b")
			c.want(2, "audit", "list", "--limit", "0")
		})
	}
}
