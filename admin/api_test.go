package admin_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/admin"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// call makes one API request with cert (none when nil) and returns the
// status and the decoded body.
func call(t *testing.T, c *http.Client, method, u, body string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, u, rd)
	if method != "GET" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v map[string]any
	_ = json.NewDecoder(bytes.NewReader(b)).Decode(&v)
	return resp.StatusCode, v
}

// apiClients are an operator of each role ("<role>-op") and a revoked
// admin's certificate ("gone").
func apiClients(t *testing.T, st store.Store, ca *testCA, roots *x509.CertPool) (map[string]*http.Client, tls.Certificate) {
	t.Helper()
	ctx := context.Background()
	hour := time.Now().Add(time.Hour)
	clients := map[string]*http.Client{}
	for _, role := range store.Roles {
		c := ca.issue(t, role+"-op", hour, false)
		if err := st.OperatorAdd(ctx, store.Operator{Name: role + "-op", Role: role, CertSHA256: admin.CertSHA256(c.Leaf), NotAfter: hour},
			store.AuditEvent{Actor: "test", Action: "operator.add", Subject: role}); err != nil {
			t.Fatal(err)
		}
		clients[role] = client(roots, &c)
	}
	gone := ca.issue(t, "gone", hour, false)
	if err := st.OperatorAdd(ctx, store.Operator{Name: "gone", Role: store.RoleAdmin, CertSHA256: admin.CertSHA256(gone.Leaf), NotAfter: hour},
		store.AuditEvent{Actor: "test", Action: "operator.add", Subject: "gone"}); err != nil {
		t.Fatal(err)
	}
	if err := st.OperatorRevoke(ctx, "gone", store.AuditEvent{Actor: "test", Action: "operator.revoke", Subject: "gone"}); err != nil {
		t.Fatal(err)
	}
	return clients, gone
}

// TestAPIRoles: every API endpoint for each role: a role below the
// endpoint's is 403, one at or above it is served; no certificate, a
// revoked operator's and an expired one are refused. The writes do what
// they say and are audited with the operator's name: revoke (operator),
// EAB create, list (no MAC key) and delete (admin). A write that is not
// application/json is 415.
func TestAPIRoles(t *testing.T) {
	t.Parallel()
	db := testdb.Open(t, "sqlite")
	st := db.Store
	ca := newTestCA(t)
	srv, roots := mtlsPanel(t, ca, db)
	clients, gone := apiClients(t, st, ca, roots)
	expired := ca.issue(t, "old", time.Now().Add(-time.Minute), false)
	issuedCert(t, st, "a9101", "api.example.com", "issuer-1", "default")
	o := pendingOrder(t, st, "api-order", "api-order.example.com")
	deact := pendingOrder(t, st, "api-deact", "api-deact.example.com")

	endpoints := []struct {
		method, path, body, role string
	}{
		{"GET", "/api/v1/accounts", "", store.RoleViewer},
		{"GET", "/api/v1/accounts/" + o.AccountID, "", store.RoleViewer},
		{"GET", "/api/v1/orders", "", store.RoleViewer},
		{"GET", "/api/v1/orders/" + o.ID, "", store.RoleViewer},
		{"GET", "/api/v1/certificates?revoked=no", "", store.RoleViewer},
		{"GET", "/api/v1/certificates/a9101", "", store.RoleViewer},
		{"GET", "/api/v1/jobs", "", store.RoleViewer},
		{"GET", "/api/v1/jobs/999999", "", store.RoleViewer}, // served: 404
		{"GET", "/api/v1/crls", "", store.RoleViewer},
		{"GET", "/api/v1/eab", "", store.RoleAdmin},
		{"POST", "/api/v1/certificates/ffff/revoke", `{"reason": 4}`, store.RoleOperator}, // served: 404
		{"POST", "/api/v1/eab", `{"label": "each role"}`, store.RoleAdmin},
		{"DELETE", "/api/v1/eab/eab_none", "", store.RoleAdmin}, // served: 404
		{"POST", "/api/v1/accounts/" + deact.AccountID + "/deactivate", "{}", store.RoleOperator},
		{"POST", "/api/v1/jobs/999999/retry", "{}", store.RoleOperator},                           // served: 404
		{"POST", "/api/v1/jobs/999999/abandon", "{}", store.RoleOperator},                         // served: 404
		{"POST", "/api/v1/certificates/ffff/ari-move", `{"reason": "drill"}`, store.RoleOperator}, // served: 404
		{"GET", "/api/v1/pauses", "", store.RoleViewer},
		{"POST", "/api/v1/pauses/lift", `{"account": "nobody"}`, store.RoleOperator}, // served: 409
		{"GET", "/api/v1/keys", "", store.RoleViewer},
		{"POST", "/api/v1/keys", `{"spki_sha256": "` + strings.Repeat("0f", 32) + `"}`, store.RoleAdmin},
		{"DELETE", "/api/v1/keys/" + strings.Repeat("e1", 32), "", store.RoleAdmin}, // served: 404
		{"GET", "/api/v1/audit?kind=operator", "", store.RoleViewer},
		{"GET", "/api/v1/audit/export", "", store.RoleViewer},
		{"GET", "/api/v1/issuers", "", store.RoleViewer},
	}
	// Every documented operation is in the list above.
	_, spec := call(t, clients[store.RoleViewer], "GET", srv.URL+"/api/v1/openapi.json", "")
	ops := 0
	for _, p := range spec["paths"].(map[string]any) {
		ops += len(p.(map[string]any))
	}
	if ops != len(endpoints) {
		t.Fatalf("openapi.json documents %d operations; the test calls %d", ops, len(endpoints))
	}
	for _, e := range endpoints {
		for _, role := range store.Roles {
			code, body := call(t, clients[role], e.method, srv.URL+e.path, e.body)
			allowed := store.RoleAllows(role, e.role)
			if allowed && (code == 401 || code == 403 || code >= 500) || !allowed && code != 403 {
				t.Errorf("%s %s as %s: %d %v (needs %s)", e.method, e.path, role, code, body, e.role)
			}
		}
		for name, c := range map[string]*http.Client{"no certificate": client(roots, nil), "revoked operator": client(roots, &gone)} {
			if code, _ := call(t, c, e.method, srv.URL+e.path, e.body); code != 401 && code != 403 {
				t.Errorf("%s %s with %s: %d, want refused", e.method, e.path, name, code)
			}
		}
		req, _ := http.NewRequest(e.method, srv.URL+e.path, nil)
		if resp, err := client(roots, &expired).Do(req); err == nil {
			resp.Body.Close()
			t.Errorf("%s %s with an expired certificate: %d, want the handshake refused", e.method, e.path, resp.StatusCode)
		}
	}

	apiWrites(t, st, srv.URL, clients, deact.AccountID)
}

// apiWrites checks TestAPIRoles' writes, by the roles that may: revoke,
// EAB create, list and delete, deactivate, each audited in their name.
func apiWrites(t *testing.T, st store.Store, base string, clients map[string]*http.Client, deactAccount string) {
	t.Helper()
	ctx := context.Background()
	if code, v := call(t, clients[store.RoleViewer], "GET", base+"/api/v1/certificates/a9101", ""); code != 200 || v["Serial"] != "a9101" {
		t.Fatalf("GET certificate: %d %v", code, v)
	}
	req, _ := http.NewRequest("POST", base+"/api/v1/certificates/a9101/revoke", strings.NewReader("reason=4"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, err := clients[store.RoleOperator].Do(req); err != nil || resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("a form-encoded revoke: %v %v, want 415", resp, err)
	}
	if code, v := call(t, clients[store.RoleOperator], "POST", base+"/api/v1/certificates/a9101/revoke", `{"reason": 4}`); code != 200 || v["done"] != true {
		t.Fatalf("revoke: %d %v", code, v)
	}
	evs, _, err := st.AuditFind(ctx, store.AuditFilter{Action: "revoke"}, store.Page{})
	if err != nil || len(evs) != 1 || evs[0].Actor != "admin:operator-op" || !strings.Contains(evs[0].Detail, "admin API") {
		t.Fatalf("revoke audit = %+v, %v; want one by admin:operator-op via the API", evs, err)
	}
	code, v := call(t, clients[store.RoleAdmin], "POST", base+"/api/v1/eab", `{"label": "ci", "allowed_domains": ["ci.example.com"]}`)
	kid, _ := v["kid"].(string)
	if code != 201 || kid == "" || v["hmac"] == nil {
		t.Fatalf("EAB create: %d %v", code, v)
	}
	code, v = call(t, clients[store.RoleAdmin], "GET", base+"/api/v1/eab", "")
	if listed := fmt.Sprint(v["items"]); code != 200 || !strings.Contains(listed, kid) || strings.Contains(listed, "hmac") {
		t.Fatalf("EAB list: %d %v; want %s without its MAC key", code, v, kid)
	}
	if code, v := call(t, clients[store.RoleAdmin], "DELETE", base+"/api/v1/eab/"+kid, ""); code != 200 {
		t.Fatalf("EAB delete: %d %v", code, v)
	}
	if evs, _, _ := st.AuditFind(ctx, store.AuditFilter{Action: "eab.create"}, store.Page{}); len(evs) != 2 || evs[0].Actor != "admin:admin-op" || evs[0].Subject != kid {
		t.Fatalf("EAB audit = %+v; want the admin's two, the newest %s", evs, kid)
	}
	if a, _ := st.AccountByID(ctx, deactAccount); a.Status != "deactivated" {
		t.Fatalf("the operator's API deactivation left the account %s", a.Status)
	}
	if evs, _, _ := st.AuditFind(ctx, store.AuditFilter{Action: "account.deactivate"}, store.Page{}); len(evs) != 1 || evs[0].Actor != "admin:operator-op" {
		t.Fatalf("deactivation audit = %+v; want one by admin:operator-op (the admin's second call changed nothing)", evs)
	}
}

// TestAPIToken: where the token is on, the API takes it in a header as
// admin, and refuses a wrong one, none, and a browser session's cookie
// (which a page elsewhere could make a browser send).
func TestAPIToken(t *testing.T) {
	t.Parallel()
	srv, _ := panel(t)
	c := &http.Client{CheckRedirect: noRedirect}
	for _, tc := range []struct {
		name, auth string
		want       int
	}{{"bearer", "Bearer " + token, 200}, {"wrong", "Bearer not-the-token-0123456789", 401}, {"none", "", 401}} {
		if resp, body := do(t, c, "GET", srv.URL+"/api/v1/eab", tc.auth, nil); resp.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d\n%s", tc.name, resp.StatusCode, tc.want, body)
		}
	}
	sc, _ := signIn(t, srv.URL, "alice", "/")
	resp, err := sc.Get(srv.URL + "/api/v1/eab")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a session cookie on the API: %d, want 401", resp.StatusCode)
	}
}
