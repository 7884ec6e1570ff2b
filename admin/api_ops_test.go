package admin_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/admin"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/protocol/renewal"
	"github.com/hallmark-ca/hallmark/store"
)

// TestAPIPauses: a viewer lists the paused accounts; a viewer's lift is
// 403; an operator's lifts the pause, audited in their name, and a second
// lift has nothing to do (409).
func TestAPIPauses(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, kind string) {
		f := newRoleFixture(t, kind, admin.Options{PauseAfter: time.Millisecond, PauseMinFailures: 1})
		o := pendingOrder(t, f.st, "api-pause", "api-pause.example.com")
		if err := f.st.ChallengeVerdict(context.Background(), store.Verdict{ChallengeID: claim(t, f.st, o), Status: acme.StatusInvalid,
			Error: &acme.Problem{Type: acme.ProblemUnauthorized, Detail: "test"}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		code, v := call(t, f.viewer, "GET", f.srv.URL+"/api/v1/pauses", "")
		if listed := fmt.Sprint(v["items"]); code != 200 || !strings.Contains(listed, o.AccountID) || !strings.Contains(listed, "dns:api-pause.example.com") {
			t.Fatalf("pauses: %d %v", code, v)
		}
		lift := fmt.Sprintf(`{"account": %q, "identifier": "dns:api-pause.example.com"}`, o.AccountID)
		if code, v := call(t, f.viewer, "POST", f.srv.URL+"/api/v1/pauses/lift", lift); code != 403 {
			t.Fatalf("viewer's lift: %d %v", code, v)
		}
		if code, v := call(t, f.operator, "POST", f.srv.URL+"/api/v1/pauses/lift", lift); code != 200 || v["lifted"] != float64(1) {
			t.Fatalf("operator's lift: %d %v", code, v)
		}
		auditBy(t, f.st, store.ActionPauseLifted, "admin:bob")
		if code, v := call(t, f.operator, "POST", f.srv.URL+"/api/v1/pauses/lift", lift); code != 409 {
			t.Fatalf("a second lift: %d %v, want 409", code, v)
		}
		if code, v := call(t, f.operator, "POST", f.srv.URL+"/api/v1/pauses/lift", `{"identifier": "dns:x"}`); code != 400 {
			t.Fatalf("a lift naming no account: %d %v, want 400", code, v)
		}
		if code, v := call(t, f.operator, "POST", f.srv.URL+"/api/v1/pauses/lift", `{"account": "a", "identifier": "email:x"}`); code != 400 {
			t.Fatalf("a lift naming an identifier of no ACME type: %d %v, want 400", code, v)
		}
	})
}

// TestAPIKeys: a viewer lists the blocked keys; only an admin blocks one
// (its live certificates revoked) and removes a block, each audited in
// their name; a key that is not 64 hex digits is 400, an unblocked one 404.
func TestAPIKeys(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, kind string) {
		f := newRoleFixture(t, kind, admin.Options{})
		key := strings.Repeat("5a", 32)
		block := `{"spki_sha256": "` + key + `", "source": "ticket 7"}`
		if code, v := call(t, f.operator, "POST", f.srv.URL+"/api/v1/keys", block); code != 403 {
			t.Fatalf("operator's block: %d %v", code, v)
		}
		code, v := call(t, f.admin, "POST", f.srv.URL+"/api/v1/keys", block)
		if code != 201 || v["already_blocked"] != false || !strings.Contains(fmt.Sprint(v["key"]), key) {
			t.Fatalf("admin's block: %d %v", code, v)
		}
		if code, v := call(t, f.admin, "POST", f.srv.URL+"/api/v1/keys", `{"spki_sha256": "abc"}`); code != 400 {
			t.Fatalf("a short key: %d %v, want 400", code, v)
		}
		code, v = call(t, f.viewer, "GET", f.srv.URL+"/api/v1/keys", "")
		if listed := fmt.Sprint(v["items"]); code != 200 || !strings.Contains(listed, key) || !strings.Contains(listed, "ticket 7") || !strings.Contains(listed, "admin:carl") {
			t.Fatalf("keys: %d %v", code, v)
		}
		auditBy(t, f.st, store.ActionKeyBlock, "admin:carl")
		if code, v := call(t, f.operator, "DELETE", f.srv.URL+"/api/v1/keys/"+key, ""); code != 403 {
			t.Fatalf("operator's unblock: %d %v", code, v)
		}
		if code, v := call(t, f.admin, "DELETE", f.srv.URL+"/api/v1/keys/"+key, ""); code != 200 {
			t.Fatalf("admin's unblock: %d %v", code, v)
		}
		auditBy(t, f.st, store.ActionKeyUnblock, "admin:carl")
		if code, v := call(t, f.admin, "DELETE", f.srv.URL+"/api/v1/keys/"+key, ""); code != 404 {
			t.Fatalf("a second unblock: %d %v, want 404", code, v)
		}
		if code, v := call(t, f.viewer, "GET", f.srv.URL+"/api/v1/keys", ""); code != 200 || strings.Contains(fmt.Sprint(v["items"]), key) {
			t.Fatalf("the unblocked key is still listed (or the list failed): %d %v", code, v)
		}
	})
}

// TestAPIARIMove: an operator moves a certificate's renewal window; it is
// then the window renewalInfo serves (renewal.Suggested, RFC 9773 §4.2),
// in the past, with the reason; audited in their name. A viewer is 403, no
// reason 400, an unknown serial 404, a revoked certificate 409.
func TestAPIARIMove(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, kind string) {
		f := newRoleFixture(t, kind, admin.Options{})
		ctx := context.Background()
		issuedCert(t, f.st, "a7a201", "api-ari.example.com", "issuer-1", "default")
		u := f.srv.URL + "/api/v1/certificates/a7a201/ari-move"
		if code, v := call(t, f.viewer, "POST", u, `{"reason": "drill"}`); code != 403 {
			t.Fatalf("viewer's move: %d %v", code, v)
		}
		if code, v := call(t, f.operator, "POST", u, `{"reason": " "}`); code != 400 {
			t.Fatalf("a move without a reason: %d %v", code, v)
		}
		if code, v := call(t, f.operator, "POST", f.srv.URL+"/api/v1/certificates/ffff/ari-move", `{"reason": "drill"}`); code != 404 {
			t.Fatalf("an unknown serial: %d %v", code, v)
		}
		if code, v := call(t, f.operator, "POST", u, `{"reason": "issuer key ceremony"}`); code != 200 || v["moved"] != true {
			t.Fatalf("operator's move: %d %v", code, v)
		}
		auditBy(t, f.st, "ari.move", "admin:bob")
		c, err := f.st.CertificateBySerial(ctx, "a7a201")
		if err != nil {
			t.Fatal(err)
		}
		now, _ := f.st.Now(ctx)
		win, err := renewal.Suggested(ctx, f.st, c, profile.Default())
		if err != nil || win.Source != renewal.FromOperator || win.Reason != "issuer key ceremony" || !win.End.Before(now) {
			t.Fatalf("the window renewalInfo serves: %+v, %v; want the operator's, in the past", win, err)
		}
		if _, err := f.st.Revoke(ctx, "a7a201", 4, store.AuditEvent{Actor: "test", Action: "revoke", Subject: "a7a201"}); err != nil {
			t.Fatal(err)
		}
		if code, v := call(t, f.operator, "POST", u, `{"reason": "again"}`); code != 409 {
			t.Fatalf("moving a revoked certificate: %d %v, want 409", code, v)
		}
	})
}

// TestAPIAudit: a viewer lists the audit log with the audit page's filters
// and exports it as JSON lines, oldest first, from an id on.
func TestAPIAudit(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, kind string) {
		f := newRoleFixture(t, kind, admin.Options{})
		ctx := context.Background()
		call(t, f.viewer, "GET", f.srv.URL+"/api/v1/issuers", "") // the viewer's sign-in, recorded before the events
		for _, s := range []string{"one", "two"} {
			if err := f.st.AuditRecord(ctx, store.AuditEvent{Actor: "cli:test", Action: "test.api", Subject: s}); err != nil {
				t.Fatal(err)
			}
		}
		code, v := call(t, f.viewer, "GET", f.srv.URL+"/api/v1/audit?kind=test.api&since=2020-01-01", "")
		items, _ := v["items"].([]any)
		if code != 200 || len(items) != 2 || items[0].(map[string]any)["subject"] != "two" || items[0].(map[string]any)["hash"] == "" {
			t.Fatalf("audit list: %d %v; want the two test.api events, newest first, chained", code, v)
		}
		if code, v := call(t, f.viewer, "GET", f.srv.URL+"/api/v1/audit?since=yesterday", ""); code != 400 {
			t.Fatalf("a since that is no date: %d %v", code, v)
		}
		lines := exportLines(t, f.viewer, f.srv.URL+"/api/v1/audit/export")
		var ids []int64
		var actions []string
		for _, l := range lines {
			ids = append(ids, int64(l["id"].(float64)))
			actions = append(actions, l["action"].(string))
		}
		if n := len(lines); n != 6 || actions[n-1] != "test.api" || actions[n-2] != "test.api" {
			t.Fatalf("export: actions %v; want the three operators' adds, the viewer's sign-in, then the two test events", actions)
		}
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				t.Fatalf("export ids %v are not ascending", ids)
			}
		}
		after := exportLines(t, f.viewer, fmt.Sprintf("%s/api/v1/audit/export?after=%d", f.srv.URL, ids[len(ids)-2]))
		if len(after) != 1 || after[0]["subject"] != "two" {
			t.Fatalf("export after %d: %v; want the last event alone", ids[len(ids)-2], after)
		}
	})
}

// exportLines GETs an export and decodes its lines.
func exportLines(t *testing.T, c *http.Client, u string) []map[string]any {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var out []map[string]any
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// TestAPIIssuers: a viewer lists the managed issuers with their state.
func TestAPIIssuers(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, kind string) {
		f := newRoleFixture(t, kind, admin.Options{})
		ctx := context.Background()
		now, _ := f.st.Now(ctx)
		if err := f.st.IssuerRecordPut(ctx, store.IssuerRecord{ID: "1550e1", Name: "CA 1550e1", KeyType: "p256", NotAfter: now.Add(time.Hour)}, []byte{0x30, 0x00}, nil); err != nil {
			t.Fatal(err)
		}
		code, v := call(t, f.viewer, "GET", f.srv.URL+"/api/v1/issuers", "")
		items, _ := v["items"].([]any)
		if code != 200 || len(items) != 1 || items[0].(map[string]any)["id"] != "1550e1" || items[0].(map[string]any)["state"] != "active" {
			t.Fatalf("issuers: %d %v", code, v)
		}
	})
}
