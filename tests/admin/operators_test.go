package admin

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hallmark-ca/hallmark/admin/operatorca"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/tests/harness"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// certProxy forwards a browser's plain requests to the panel over TLS,
// presenting the operator's client certificate: headless Chromium has no
// flag to present one (only a system policy and an NSS database), so the
// credential rides in this hop, and the panel sees exactly what it sees
// from a browser holding it.
func certProxy(t *testing.T, panel string, roots *x509.CertPool, certFile, keyFile string) string {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse(panel)
	p := httputil.NewSingleHostReverseProxy(target)
	p.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}}}
	inner := p.Director
	p.Director = func(r *http.Request) {
		inner(r)
		r.Host = target.Host // the panel's CSRF check compares Origin with Host
		if r.Header.Get("Origin") != "" {
			r.Header.Set("Origin", panel)
		}
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestOperatorCertificateSignIn: the real frontend serves the panel over
// TLS with the token turned off; `hallmark operators add` issues a viewer
// and an operator their certificates from the operators' CA. In Chromium
// the viewer sees the certificate lego was issued without its revoke and
// ARI forms, and their forged POST is 403; the operator asks for its
// renewal now (the ARI endpoint then suggests a window in the past) and
// revokes it from the forms, and the audit rows name them. Without a
// certificate the panel refuses.
func TestOperatorCertificateSignIn(t *testing.T) {
	lego := requireTool(t, "lego", "apt-get install lego")
	ctx := browser(t)
	dir := t.TempDir()
	if _, err := operatorca.Init(filepath.Join(dir, "operators-ca.pem"), filepath.Join(dir, "operators-ca.key"), "test operators CA"); err != nil {
		t.Fatal(err)
	}
	adminListen := fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
	dbURL := testdb.SQLite(t)
	c := harness.StartCA(t, dbURL, harness.Options{Dir: dir, Tables: fmt.Sprintf(`
[admin]
listen = %q
token_off = true
tls_cert_file = "frontend.pem"
tls_key_file = "frontend.key"
client_ca_file = "operators-ca.pem"
client_ca_key_file = "operators-ca.key"
`, adminListen)})
	rootPEM, err := os.ReadFile(c.Root)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(rootPEM)
	panel := "https://" + adminListen
	tlsClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}, Timeout: 5 * time.Second}
	if !harness.WaitOK(tlsClient, panel+"/healthz", time.Now().Add(30*time.Second)) {
		t.Fatalf("the panel at %s did not become ready", panel)
	}
	creds := t.TempDir()
	c.Run("hallmark", "--config", c.Config, "operators", "add", "--role", "viewer", "--out", creds, "alice")
	c.Run("hallmark", "--config", c.Config, "operators", "add", "--role", "operator", "--out", creds, "bob")
	alice := certProxy(t, panel, roots, filepath.Join(creds, "alice.pem"), filepath.Join(creds, "alice.key"))
	bob := certProxy(t, panel, roots, filepath.Join(creds, "bob.pem"), filepath.Join(creds, "bob.key"))

	name := "www.operators.test"
	l := harness.Lego{Bin: lego, Directory: c.BaseURL + "/directory", Root: c.Root, Email: "ops@hallmark.test", Path: t.TempDir()}
	if out, err := l.Run(context.Background(), "--domains", name, "--http", "--http.port", fmt.Sprintf("127.0.0.1:%d", c.HTTPPort), "run"); err != nil {
		t.Fatalf("lego run: %v\n%s", err, out)
	}
	cert := harness.ReadCert(t, filepath.Join(l.Path, "certificates", name+".crt"))
	serial := fmt.Sprintf("%032x", cert.SerialNumber)
	certPath := "/certs/" + serial

	// No certificate, the token off: refused.
	if resp, err := tlsClient.Get(panel + "/"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no certificate: %v %v, want 401", resp, err)
	}

	// The viewer: the page without its form; a forged POST is 403.
	navigate(t, ctx, alice+certPath)
	hasForm, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector("#revoke-form, #ari-move-form") !== null`))
	if err != nil {
		t.Fatal(err)
	}
	who := text(t, ctx, "form.who span")
	if hasForm || !strings.Contains(who, "alice (viewer)") {
		t.Fatalf("viewer's page: revoke form %v, signed in as %q", hasForm, who)
	}
	csrf, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("input[name=csrf]").value`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.PostForm(alice+certPath+"/revoke", url.Values{"csrf": {csrf}, "reason": {"4"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("the viewer's forged revoke: %d, want 403", resp.StatusCode)
	}

	// The operator asks for renewal now: the real ARI endpoint then
	// suggests a window in the past, explained.
	if _, end, _ := renewalInfo(t, c, cert); !end.After(time.Now()) {
		t.Fatalf("before the move renewalInfo suggests a window ending %v", end)
	}
	navigate(t, ctx, bob+certPath)
	if err := chromedp.Do(ctx,
		chromedp.SetValue("#ari-reason", "issuer key ceremony"),
		chromedp.Click("#ari-move"),
		chromedp.WaitVisible("#flash"),
	); err != nil {
		t.Fatalf("moving the renewal window as bob: %v", err)
	}
	if flash := text(t, ctx, "#flash"); !strings.Contains(flash, "Renewal window moved") {
		t.Fatalf("after bob's move the page says %q", flash)
	}
	if _, end, expl := renewalInfo(t, c, cert); !end.Before(time.Now()) || expl == "" {
		t.Fatalf("after the move renewalInfo suggests a window ending %v, explanation %q; want it past, explained", end, expl)
	}

	// The operator revokes from the form.
	navigate(t, ctx, bob+certPath)
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
	db := testdb.OpenURL(t, dbURL)
	evs, _, err := db.Store.AuditFind(context.Background(), store.AuditFilter{Action: "revoke"}, store.Page{})
	if err != nil || len(evs) != 1 || evs[0].Actor != "admin:bob" || evs[0].Subject != serial {
		t.Fatalf("revoke audit = %+v, %v; want one row by admin:bob for %s", evs, err, serial)
	}
	if evs, _, err := db.Store.AuditFind(context.Background(), store.AuditFilter{Action: "ari.move"}, store.Page{}); err != nil || len(evs) != 1 || evs[0].Actor != "admin:bob" || evs[0].Subject != serial {
		t.Fatalf("ari.move audit = %+v, %v; want one row by admin:bob for %s", evs, err, serial)
	}
	if rep, err := store.VerifyAudit(context.Background(), db.Store); err != nil || rep.Break != nil {
		t.Fatalf("audit verify after the browser session: %+v, %v", rep, err)
	}
}
