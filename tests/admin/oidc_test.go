package admin

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/tests/harness"
	"github.com/hallmark-ca/hallmark/tests/oidcop"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// oidcSignIn presses the login page's "Sign in with" button and signs in
// at the provider's form as user; the browser ends where the panel sends
// it (the page it asked for, or the refusal).
func oidcSignIn(t *testing.T, ctx context.Context, panelPage, user string) {
	t.Helper()
	if err := chromedp.Do(ctx,
		chromedp.Navigate(panelPage),
		chromedp.WaitVisible("#oidc-sign-in"),
		chromedp.Click("#oidc-sign-in"),
		chromedp.WaitVisible("#username"),
		chromedp.SetValue("#username", user),
		chromedp.SetValue("#password", oidcop.Password),
		chromedp.Submit("#password"),
		chromedp.WaitVisible("main h1, main h2, #login-message"),
	); err != nil {
		t.Fatalf("signing in as %s through the provider: %v", user, err)
	}
}

// signOut presses the header's sign-out button.
func signOut(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Click("form.who button"), chromedp.WaitVisible("#oidc-sign-in")); err != nil {
		t.Fatalf("signing out: %v", err)
	}
}

// TestOIDCBrowserSignIn: the real frontend serves the panel with the token
// off and [admin.oidc] pointing at a real OpenID provider on another site
// (zitadel's OP). `hallmark operators add --oidc-subject` binds a viewer
// and an operator. In Chromium the viewer signs in with the login page's
// button and sees the certificate lego was issued without its revoke form,
// and their forged POST is 403; the operator signs in and revokes it, and
// the audit rows name them and the method; an identity no operator holds
// is refused with a page and an audit row.
func TestOIDCBrowserSignIn(t *testing.T) {
	lego := requireTool(t, "lego", "apt-get install lego")
	ctx := browser(t)
	dir := t.TempDir()
	adminListen := fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
	panel := "http://" + adminListen
	issuer := oidcop.Start(t, "localhost", oidcop.NewUsers("alice", "bob", "mallory"), map[string][2]string{"hallmark": {"oidc-client-secret", panel + "/login/oidc/callback"}})
	if err := os.WriteFile(filepath.Join(dir, "oidc.secret"), []byte("oidc-client-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dbURL := testdb.SQLite(t)
	c := harness.StartCA(t, dbURL, harness.Options{Dir: dir, Tables: fmt.Sprintf(`
[admin]
listen = %q
token_off = true

[admin.oidc]
issuer = %q
client_id = "hallmark"
client_secret_file = "oidc.secret"
provider_name = "Test SSO"
`, adminListen, issuer)})
	if !harness.WaitOK(http.DefaultClient, panel+"/healthz", time.Now().Add(30*time.Second)) {
		t.Fatalf("the panel at %s did not become ready", panel)
	}
	c.Run("hallmark", "--config", c.Config, "operators", "add", "--role", "viewer", "--oidc-subject", "sub-alice", "alice")
	c.Run("hallmark", "--config", c.Config, "operators", "add", "--role", "operator", "--oidc-subject", "sub-bob", "bob")

	name := "www.oidc.test"
	l := harness.Lego{Bin: lego, Directory: c.BaseURL + "/directory", Root: c.Root, Email: "ops@hallmark.test", Path: t.TempDir()}
	if out, err := l.Run(context.Background(), "--domains", name, "--http", "--http.port", fmt.Sprintf("127.0.0.1:%d", c.HTTPPort), "run"); err != nil {
		t.Fatalf("lego run: %v\n%s", err, out)
	}
	cert := harness.ReadCert(t, filepath.Join(l.Path, "certificates", name+".crt"))
	serial := fmt.Sprintf("%032x", cert.SerialNumber)
	certPath := panel + "/certs/" + serial

	// The viewer: back on the page asked for, without its forms; a forged
	// POST with their session and CSRF token is 403.
	oidcSignIn(t, ctx, certPath, "alice")
	viewerForgesRevoke(t, ctx, panel, certPath)
	signOut(t, ctx)

	// The operator revokes from the form.
	oidcSignIn(t, ctx, certPath, "bob")
	if who := text(t, ctx, "form.who span"); !strings.Contains(who, "bob (operator)") {
		t.Fatalf("bob's page says signed in as %q", who)
	}
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible("#revoke-form"),
		chromedp.SetValue("#reason", "4"),
		chromedp.Click("#revoke"),
		chromedp.WaitVisible("#flash"),
	); err != nil {
		t.Fatalf("revoking as bob: %v", err)
	}
	if flash := text(t, ctx, "#flash"); !strings.Contains(flash, "Revoked") {
		t.Fatalf("after bob's revoke the page says %q", flash)
	}
	signOut(t, ctx)

	// An identity no operator holds: refused, with how to bind it.
	oidcSignIn(t, ctx, panel+"/", "mallory")
	if msg := text(t, ctx, "#login-message"); !strings.Contains(msg, "mallory@ops.test") || !strings.Contains(msg, "--oidc-subject sub-mallory") {
		t.Fatalf("mallory's sign-in says %q", msg)
	}
	checkOIDCAudit(t, dbURL, serial)
}

// viewerForgesRevoke checks the viewer's certificate page has no revoke or
// ARI form, then posts a revoke with the browser's own session cookie and
// the page's CSRF token: 403.
func viewerForgesRevoke(t *testing.T, ctx context.Context, panel, certPath string) {
	t.Helper()
	if who := text(t, ctx, "form.who span"); !strings.Contains(who, "alice (viewer)") {
		t.Fatalf("alice's page says signed in as %q", who)
	}
	var loc string
	hasForm, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector("#revoke-form, #ari-move-form") !== null`))
	if err == nil {
		loc, err = chromedp.Run(ctx, chromedp.Location())
	}
	if err != nil || hasForm || loc != certPath {
		t.Fatalf("viewer's page %s: revoke form %v, %v (want %s without the form)", loc, hasForm, err, certPath)
	}
	csrf, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("input[name=csrf]").value`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{panel + "/"}})
	if err != nil {
		t.Fatal(err)
	}
	cookies := got.Cookies
	req, _ := http.NewRequest("POST", certPath+"/revoke", strings.NewReader(url.Values{"csrf": {csrf}, "reason": {"4"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, ck := range cookies {
		req.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("the viewer's forged revoke with their session: %d, want 403", resp.StatusCode)
	}
}

// checkOIDCAudit: the sign-ins name the operators and the method, the
// revoke names bob, mallory's refusal is recorded, and the chain holds.
func checkOIDCAudit(t *testing.T, dbURL, serial string) {
	t.Helper()
	db := testdb.OpenURL(t, dbURL)
	find := func(action string) []store.AuditEvent {
		evs, _, err := db.Store.AuditFind(context.Background(), store.AuditFilter{Action: action}, store.Page{})
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	logins := map[string]bool{}
	for _, ev := range find("admin.login") {
		if strings.Contains(ev.Detail, "method oidc") {
			logins[ev.Actor] = true
		}
	}
	if !logins["admin:alice"] || !logins["admin:bob"] || len(logins) != 2 {
		t.Fatalf("OIDC sign-ins audited for %v, want admin:alice and admin:bob", logins)
	}
	if evs := find("revoke"); len(evs) != 1 || evs[0].Actor != "admin:bob" || evs[0].Subject != serial {
		t.Fatalf("revoke audit = %+v; want one row by admin:bob for %s", evs, serial)
	}
	if evs := find("admin.login_refused"); len(evs) != 1 || evs[0].Subject != "sub-mallory" {
		t.Fatalf("refusal audit = %+v; want mallory's", evs)
	}
	if rep, err := store.VerifyAudit(context.Background(), db.Store); err != nil || rep.Break != nil {
		t.Fatalf("audit verify after the browser session: %+v, %v", rep, err)
	}
}
