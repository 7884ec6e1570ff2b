package admin_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/admin"
	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// Each page with a form hides it from a role that may not submit it, and
// the server refuses that role's forged POST all the same. The certificate
// page's revoke form is TestClientCertificateRoles'.

// roleFixture is a panel over TLS on a store of one kind, with a viewer
// (alice), an operator (bob) and an admin (carl) signed in by client
// certificate.
type roleFixture struct {
	srv                     *httptest.Server
	db                      *open.DB
	st                      store.Store
	viewer, operator, admin *http.Client
}

func newRoleFixture(t *testing.T, kind string, o admin.Options) *roleFixture {
	t.Helper()
	ctx := context.Background()
	db := testdb.Open(t, kind)
	ca := newTestCA(t)
	srv, roots := mtlsPanelWith(t, ca, db, o)
	f := &roleFixture{srv: srv, db: db, st: db.Store}
	hour := time.Now().Add(time.Hour)
	for _, op := range []struct {
		name, role string
		c          **http.Client
	}{{"alice", store.RoleViewer, &f.viewer}, {"bob", store.RoleOperator, &f.operator}, {"carl", store.RoleAdmin, &f.admin}} {
		cert := ca.issue(t, op.name, hour, false)
		if err := db.Store.OperatorAdd(ctx, store.Operator{Name: op.name, Role: op.role, CertSHA256: admin.CertSHA256(cert.Leaf), NotAfter: hour},
			store.AuditEvent{Actor: "test", Action: "operator.add", Subject: op.name}); err != nil {
			t.Fatal(err)
		}
		*op.c = client(roots, &cert)
	}
	return f
}

// hidesForm checks page as the viewer: no form marked marker, and a POST
// of form to action with the viewer's own CSRF token (the sign-out
// form's) is 403 naming the role and changes nothing. As the operator, the
// page has the form, and the same POST with the operator's token is done
// (303) and changed reports its change.
func (f *roleFixture) hidesForm(t *testing.T, page, marker, action string, form url.Values, changed func() bool) {
	t.Helper()
	resp, body := do(t, f.viewer, "GET", f.srv.URL+page, "", nil)
	if resp.StatusCode != 200 || !strings.Contains(body, "alice (viewer)") {
		t.Fatalf("viewer GET %s: %d\n%s", page, resp.StatusCode, body)
	}
	if strings.Contains(body, marker) || strings.Contains(body, `action="`+action+`"`) {
		t.Fatalf("the viewer is shown the form %s on %s:\n%s", marker, page, body)
	}
	viewerForm := url.Values{"csrf": {csrfOf(t, body)}}
	for k, v := range form {
		viewerForm[k] = v
	}
	resp, body = do(t, f.viewer, "POST", f.srv.URL+action, "", viewerForm)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "role viewer") {
		t.Fatalf("viewer's forged POST %s: %d %s; want 403 naming the role", action, resp.StatusCode, body)
	}
	if changed() {
		t.Fatalf("the viewer's refused POST %s changed the record", action)
	}
	_, body = do(t, f.operator, "GET", f.srv.URL+page, "", nil)
	if !strings.Contains(body, marker) {
		t.Fatalf("the operator is not shown the form %s on %s:\n%s", marker, page, body)
	}
	opForm := url.Values{"csrf": {csrfOf(t, body)}}
	for k, v := range form {
		opForm[k] = v
	}
	if resp, body := do(t, f.operator, "POST", f.srv.URL+action, "", opForm); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("operator's POST %s: %d %s", action, resp.StatusCode, body)
	}
	if !changed() {
		t.Fatalf("the operator's POST %s changed nothing", action)
	}
}

// auditBy fails unless st has exactly one event of action, by actor.
func auditBy(t *testing.T, st store.Store, action, actor string) {
	t.Helper()
	evs, _, err := st.AuditFind(context.Background(), store.AuditFilter{Action: action}, store.Page{})
	if err != nil || len(evs) != 1 || evs[0].Actor != actor {
		t.Fatalf("%s audit = %+v, %v; want one by %s", action, evs, err, actor)
	}
}

func bothStores(t *testing.T, run func(t *testing.T, kind string)) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			run(t, kind)
		})
	}
}

// TestRolesAccountPage: the account page's deactivate form.
func TestRolesAccountPage(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, kind string) {
		f := newRoleFixture(t, kind, admin.Options{})
		acct := pendingOrder(t, f.st, "roles-acct", "roles-acct.example.com").AccountID
		f.hidesForm(t, "/accounts/"+acct, `id="deactivate"`, "/accounts/"+acct+"/deactivate", nil, func() bool {
			a, err := f.st.AccountByID(context.Background(), acct)
			return err == nil && a.Status == acme.StatusDeactivated
		})
		auditBy(t, f.st, "account.deactivate", "admin:bob")
	})
}

// TestRolesJobPage: the job page's retry and abandon forms.
func TestRolesJobPage(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, kind string) {
		f := newRoleFixture(t, kind, admin.Options{})
		_, id := claimed(t, f.st, pendingOrder(t, f.st, "roles-job", "roles-job.example.com"))
		page := fmt.Sprintf("/jobs/%d", id)
		if _, body := do(t, f.viewer, "GET", f.srv.URL+page, "", nil); strings.Contains(body, `id="retry"`) {
			t.Fatalf("the viewer is shown the retry form:\n%s", body)
		}
		f.hidesForm(t, page, `id="abandon"`, page+"/abandon", nil, func() bool {
			j, err := jobs.Show(context.Background(), f.db.Queue, id)
			return err == nil && j.State == "cancelled"
		})
		auditBy(t, f.st, "job.abandon", "admin:bob")
	})
}

// TestRolesPausesPage: the pauses page's Lift forms.
func TestRolesPausesPage(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, kind string) {
		f := newRoleFixture(t, kind, admin.Options{PauseAfter: time.Millisecond, PauseMinFailures: 1})
		ctx := context.Background()
		o := pendingOrder(t, f.st, "roles-pause", "roles-pause.example.com")
		if err := f.st.ChallengeVerdict(ctx, store.Verdict{ChallengeID: claim(t, f.st, o), Status: acme.StatusInvalid,
			Error: &acme.Problem{Type: acme.ProblemUnauthorized, Detail: "test"}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // the run is older than PauseAfter
		form := url.Values{"account": {o.AccountID}, "identifier": {"dns:roles-pause.example.com"}}
		f.hidesForm(t, "/pauses", `class="lift-form"`, "/pauses/lift", form, func() bool {
			l, _, err := f.st.PausesList(ctx, store.PauseRule{}, store.PauseFilter{AccountID: o.AccountID, All: true}, store.Page{})
			return err == nil && len(l) == 0
		})
		auditBy(t, f.st, store.ActionPauseLifted, "admin:bob")
	})
}

// TestRolesCertPageARIMove: the certificate page's ARI form. The operator's
// move is the window the page (and renewalInfo, by the same rule) shows.
func TestRolesCertPageARIMove(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, kind string) {
		f := newRoleFixture(t, kind, admin.Options{})
		ctx := context.Background()
		issuedCert(t, f.st, "a71a01", "roles-ari.example.com", "issuer-1", "default")
		f.hidesForm(t, "/certs/a71a01", `id="ari-move-form"`, "/certs/a71a01/ari-move", url.Values{"reason": {"key ceremony redo"}}, func() bool {
			_, err := f.st.RenewalWindowBySerial(ctx, "a71a01")
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				t.Fatal(err)
			}
			return err == nil
		})
		auditBy(t, f.st, "ari.move", "admin:bob")
		_, page := do(t, f.operator, "GET", f.srv.URL+"/certs/a71a01", "", nil)
		if m := renewalRE.FindStringSubmatch(page); m == nil || !strings.Contains(m[1], "moved by an operator: key ceremony redo") {
			t.Fatalf("after the move the page shows the window %q", m)
		}
		if resp, body := do(t, f.operator, "POST", f.srv.URL+"/certs/a71a01/ari-move", "", url.Values{"csrf": {csrfOf(t, page)}}); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("a move without a reason: %d %s; want 400", resp.StatusCode, body)
		}
	})
}
