package admin_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/admin"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/protocol/revocation"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// TestIssuersPage: the page lists the issuers with their state and
// profiles; its form rotates the default profile to a new issuer (the old
// one retiring) and its button retires, each audited as the operator; an
// unknown issuer or a refused retirement is a notice, not a change.
func TestIssuersPage(t *testing.T) {
	t.Parallel()
	db := testdb.Open(t, "sqlite")
	st := db.Store
	p, err := admin.New(admin.Options{Store: db.Store, Queue: db.Queue, Token: token, Profiles: map[string]profile.Profile{"default": profile.Default()},
		Revoker: revocation.New(db.Store, map[string]profile.Profile{"default": profile.Default()})})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p.Handler())
	t.Cleanup(srv.Close)
	ctx := context.Background()
	now, _ := st.Now(ctx)
	for _, id := range []string{"aa01", "bb02"} {
		if err := st.IssuerRecordPut(ctx, store.IssuerRecord{ID: id, Name: "CA " + id, KeyType: "p256", NotAfter: now.Add(time.Hour)}, []byte{0x30, 0x00}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.ProfileIssuerDefault(ctx, "default", "aa01"); err != nil {
		t.Fatal(err)
	}
	onToken := store.IssuerRecord{ID: "cc03", Name: "HSM CA", KeyType: "p384", NotAfter: now.Add(time.Hour), Backend: "softhsm", KeyLabel: "k"}
	if err := st.IssuerRecordPut(ctx, onToken, []byte{0x30, 0x00}, nil); err != nil {
		t.Fatal(err)
	}
	c := &http.Client{CheckRedirect: noRedirect}
	bearer := "Bearer " + token
	_, page := do(t, c, "GET", srv.URL+"/issuers", bearer, nil)
	if !strings.Contains(page, "<code>aa01</code>") || !strings.Contains(page, `id="rotate"`) {
		t.Fatalf("the issuers page lists no issuer or offers no rotation:\n%s", page)
	}
	csrf := csrfOf(t, page)
	resp, _ := do(t, c, "POST", srv.URL+"/issuers/rotate", bearer, url.Values{"csrf": {csrf}, "profile": {"default"}, "issuer": {"nope"}})
	if got := noticeOf(follow(t, srv.URL, resp, bearer)); !strings.HasPrefix(got, "Not rotated") {
		t.Fatalf("rotating to an unknown issuer: the page says %q", got)
	}
	if !strings.Contains(page, "p384, on the token of softhsm") {
		t.Fatalf("the issuers page does not say where cc03's key is:\n%s", page)
	}
	// The local profile's workers have no token: cc03 is refused.
	resp, _ = do(t, c, "POST", srv.URL+"/issuers/rotate", bearer, url.Values{"csrf": {csrf}, "profile": {"default"}, "issuer": {"cc03"}})
	if got := noticeOf(follow(t, srv.URL, resp, bearer)); !strings.HasPrefix(got, "Not rotated") || !strings.Contains(got, "token of backend softhsm") {
		t.Fatalf("rotating a local profile to an issuer on a token: the page says %q", got)
	}
	resp, _ = do(t, c, "POST", srv.URL+"/issuers/rotate", bearer, url.Values{"csrf": {csrf}, "profile": {"default"}, "issuer": {"bb02"}})
	if got := noticeOf(follow(t, srv.URL, resp, bearer)); !strings.HasPrefix(got, "Rotated") || !strings.Contains(got, "Retiring: aa01") {
		t.Fatalf("rotating: the page says %q", got)
	}
	m, err := st.ProfileIssuers(ctx)
	if err != nil || len(m["default"]) != 1 || m["default"][0].ID != "bb02" {
		t.Fatalf("after the rotation default signs with %+v, %v; want bb02", m["default"], err)
	}
	resp, _ = do(t, c, "POST", srv.URL+"/issuers/bb02/retire", bearer, url.Values{"csrf": {csrf}})
	if got := noticeOf(follow(t, srv.URL, resp, bearer)); !strings.HasPrefix(got, "Not retired") {
		t.Fatalf("retiring the issuer a profile names: the page says %q", got)
	}
	resp, _ = do(t, c, "POST", srv.URL+"/issuers/aa01/retire", bearer, url.Values{"csrf": {csrf}})
	if got := noticeOf(follow(t, srv.URL, resp, bearer)); got != "Issuer aa01 is retired." {
		t.Fatalf("retiring the retiring issuer with no certificate: the page says %q", got)
	}
	evs, _, err := st.AuditList(ctx, store.Page{})
	if err != nil || len(evs) < 2 || evs[0].Action != "issuer.retire" || evs[1].Action != "issuer.rotate" || evs[0].Actor != "admin:token" {
		t.Fatalf("audit = %+v, %v; want issuer.retire after issuer.rotate by admin:token", evs, err)
	}
}

// TestIssuersAdminOnly: issuer management is the admin's. A viewer and an
// operator see the issuers but none of the create, rotate or retire
// forms, and their posts (with their own CSRF token) are 403 and change
// nothing; an admin sees all three. An admin's create whose hallmark-worker
// is not there is a notice naming it, and records nothing.
func TestIssuersAdminOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Open(t, "sqlite")
	st := db.Store
	ca := newTestCA(t)
	missing := filepath.Join(t.TempDir(), "hallmark-worker")
	srv, roots := mtlsPanel(t, ca, db, func(o *admin.Options) {
		o.Profiles = map[string]profile.Profile{"default": profile.Default()}
		o.Worker = missing
	})
	hour := time.Now().Add(time.Hour)
	now, _ := st.Now(ctx)
	for _, id := range []string{"aa01", "bb02"} {
		if err := st.IssuerRecordPut(ctx, store.IssuerRecord{ID: id, Name: "CA " + id, KeyType: "p256", NotAfter: now.Add(time.Hour)}, []byte{0x30, 0x00}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.ProfileIssuerDefault(ctx, "default", "aa01"); err != nil {
		t.Fatal(err)
	}
	forms := []string{`id="create"`, `id="rotate"`, `class="retire"`}
	posts := map[string]url.Values{
		"/issuers/create":      {"name": {"Sneaky CA"}, "key_type": {"p256"}},
		"/issuers/rotate":      {"profile": {"default"}, "issuer": {"bb02"}},
		"/issuers/aa01/retire": {},
	}
	clients := map[string]*http.Client{}
	for _, role := range store.Roles {
		cert := ca.issue(t, role+"-iss", hour, false)
		if err := st.OperatorAdd(ctx, store.Operator{Name: role + "-iss", Role: role, CertSHA256: admin.CertSHA256(cert.Leaf), NotAfter: hour},
			store.AuditEvent{Actor: "test", Action: "operator.add", Subject: role}); err != nil {
			t.Fatal(err)
		}
		c := client(roots, &cert)
		clients[role] = c
		_, page := do(t, c, "GET", srv.URL+"/issuers", "", nil)
		if !strings.Contains(page, "<code>aa01</code>") {
			t.Fatalf("%s: the issuers page lists no issuer:\n%s", role, page)
		}
		for _, f := range forms {
			if strings.Contains(page, f) != (role == store.RoleAdmin) {
				t.Errorf("%s: the page shows %s: %v", role, f, strings.Contains(page, f))
			}
		}
		if role == store.RoleAdmin {
			continue
		}
		for path, form := range posts {
			form.Set("csrf", csrfOf(t, page))
			if resp, _ := do(t, c, "POST", srv.URL+path, "", form); resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s: POST %s: %d, want 403", role, path, resp.StatusCode)
			}
		}
	}
	if m, err := st.ProfileIssuers(ctx); err != nil || len(m["default"]) != 1 || m["default"][0].ID != "aa01" {
		t.Fatalf("after refused posts default signs with %+v, %v; want aa01 still", m["default"], err)
	}
	if evs, _, err := st.AuditFind(ctx, store.AuditFilter{Action: "issuer.rotate"}, store.Page{}); err != nil || len(evs) != 0 {
		t.Fatalf("refused posts were audited: %+v, %v", evs, err)
	}

	// The admin's create, with no hallmark-worker where the panel looks.
	wantCreateFails(t, srv.URL, clients[store.RoleAdmin], st, missing)
}

// wantCreateFails posts the create form as c, an admin, and wants a notice
// naming missing (the hallmark-worker that is not there) and no new issuer.
func wantCreateFails(t *testing.T, srvURL string, c *http.Client, st store.Store, missing string) {
	t.Helper()
	ctx := context.Background()
	_, page := do(t, c, "GET", srvURL+"/issuers", "", nil)
	resp, _ := do(t, c, "POST", srvURL+"/issuers/create", "", url.Values{"csrf": {csrfOf(t, page)}, "name": {"New CA"}, "key_type": {"p384"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("admin create: %d, want 303", resp.StatusCode)
	}
	req, _ := http.NewRequest("GET", srvURL+"/issuers", nil)
	for _, ck := range resp.Cookies() {
		req.AddCookie(ck)
	}
	got, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(got.Body)
	got.Body.Close()
	if n := noticeOf(string(body)); !strings.HasPrefix(n, "Not created") || !strings.Contains(n, missing) {
		t.Fatalf("create without hallmark-worker: the page says %q; want a notice naming %s", n, missing)
	}
	if recs, err := st.IssuerRecordsList(ctx); err != nil || len(recs) != 2 {
		t.Fatalf("issuers after a failed create: %d, %v; want the 2 there were", len(recs), err)
	}
}

// TestIssuersCreateOnToken: with a pkcs11 profile, the create form offers
// its backend's token beside ca.dir (the child hallmark-worker makes the
// key there, as `hallmark issuers create --pkcs11` does); a form naming a
// backend no profile signs with is refused and creates nothing.
func TestIssuersCreateOnToken(t *testing.T) {
	t.Parallel()
	db := testdb.Open(t, "sqlite")
	hsm := profile.Default()
	hsm.Backend, hsm.Signer = "pkcs11", "softhsm"
	profs := map[string]profile.Profile{"default": profile.Default(), "hsm": hsm}
	p, err := admin.New(admin.Options{Store: db.Store, Queue: db.Queue, Token: token, Profiles: profs,
		Revoker: revocation.New(db.Store, profs), Worker: filepath.Join(t.TempDir(), "no-hallmark-worker")})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p.Handler())
	t.Cleanup(srv.Close)
	c := &http.Client{CheckRedirect: noRedirect}
	bearer := "Bearer " + token
	_, page := do(t, c, "GET", srv.URL+"/issuers", bearer, nil)
	if !strings.Contains(page, `id="create-token"`) || !strings.Contains(page, `<option value="softhsm">token of softhsm</option>`) {
		t.Fatalf("the create form offers no token for the pkcs11 profile's backend:\n%s", page)
	}
	form := url.Values{"csrf": {csrfOf(t, page)}, "name": {"HSM CA 2"}, "key_type": {"p256"}, "pkcs11": {"elsewhere"}}
	if resp, _ := do(t, c, "POST", srv.URL+"/issuers/create", bearer, form); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("create on a backend no profile names: %d, want 400", resp.StatusCode)
	}
	form.Set("pkcs11", "softhsm")
	resp, _ := do(t, c, "POST", srv.URL+"/issuers/create", bearer, form)
	if got := noticeOf(follow(t, srv.URL, resp, bearer)); !strings.HasPrefix(got, "Not created") || !strings.Contains(got, "no-hallmark-worker") {
		t.Fatalf("create on the token with no hallmark-worker here: the page says %q", got)
	}
	if recs, err := db.Store.IssuerRecordsList(context.Background()); err != nil || len(recs) != 0 {
		t.Fatalf("issuers after refused creates: %+v, %v; want none", recs, err)
	}
}
