package admin

import (
	"context"
	"crypto/x509"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hallmark-ca/hallmark/tests/harness"
)

// browser starts headless Chromium with a throwaway profile, and extra
// options.
func browser(t *testing.T, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	bin := requireTool(t, "chromium", "apt-get install chromium")
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
		// Chromium makes a directory of its own in TMPDIR
		// (org.chromium.Chromium.*) and leaves it when stopped: one more
		// in /tmp each run. Under the test's directory it goes with it.
		chromedp.Env("TMPDIR="+t.TempDir()),
	)
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	return ctx
}

// TestBrowserRevoke: an operator signs in, finds the certificate lego was
// just issued, revokes it from the form, and sees the revocation in the
// list, in the audit log and in the CRL the frontend serves.
func TestBrowserRevoke(t *testing.T) {
	lego := requireTool(t, "lego", "apt-get install lego")
	ctx := browser(t)
	c := startCA(t)

	// A real certificate, issued over http-01 by the real binaries.
	name := "www.admin-panel.test"
	path := t.TempDir()
	l := harness.Lego{Bin: lego, Directory: c.BaseURL + "/directory", Root: c.Root, Email: "ops@hallmark.test", Path: path}
	if out, err := l.Run(context.Background(), "--domains", name, "--http", "--http.port", fmt.Sprintf("127.0.0.1:%d", c.HTTPPort), "run"); err != nil {
		t.Fatalf("lego run: %v\n%s", err, out)
	}
	cert := harness.ReadCert(t, filepath.Join(path, "certificates", name+".crt"))

	// Refused without credentials; a form post without the CSRF token is
	// refused even with them.
	resp, err := http.Get(c.adminURL + "/certs")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /certs without credentials: %d, want 401", resp.StatusCode)
	}
	req, _ := http.NewRequest("POST", c.adminURL+fmt.Sprintf("/certs/%x/revoke", cert.SerialNumber), strings.NewReader("reason=1"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("revoke post without the CSRF token: %d, want 403", resp.StatusCode)
	}

	// Sign in through the login form the 401 page shows.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(c.adminURL+"/"),
		chromedp.WaitVisible("#token"),
		chromedp.SendKeys("#user", "browser-test"),
		chromedp.SendKeys("#token", c.token),
		chromedp.Click("#sign-in"),
		chromedp.WaitVisible("#count-certs"),
	); err != nil {
		t.Fatalf("signing in: %v", err)
	}

	// Find the certificate by name and revoke it from its page.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(c.adminURL+"/certs"),
		chromedp.WaitVisible("#search-name"),
		chromedp.SendKeys("#search-name", name),
		chromedp.Click("#search"),
		// The unfiltered list already shows the certificate: wait for the
		// search's own page, or the row found may be the old page's and be
		// gone by the time it is clicked.
		waitLocation("name="),
		chromedp.WaitVisible(`#certs tr[data-serial]`),
	); err != nil {
		t.Fatalf("searching for %s: %v", name, err)
	}
	attr, err := chromedp.Run(ctx, chromedp.AttributeValue(`#certs tr[data-serial]`, "data-serial"))
	if err != nil {
		t.Fatal(err)
	}
	serial := attr.Value
	if err := chromedp.Do(ctx,
		chromedp.Click(`#certs tr[data-serial] a`),
		chromedp.WaitVisible("#revoke-form"),
		chromedp.SetValue("#reason", "1"),
		chromedp.Click("#revoke"),
		chromedp.WaitVisible("#flash"),
	); err != nil {
		t.Fatalf("revoking %s: %v", serial, err)
	}
	flash := text(t, ctx, "#flash")
	status := text(t, ctx, "#cert-status")
	want, ok := new(big.Int).SetString(serial, 16)
	if !ok || want.Cmp(cert.SerialNumber) != 0 {
		t.Fatalf("the panel found serial %q for %s, want %x", serial, name, cert.SerialNumber)
	}
	if !strings.Contains(status, "revoked") || !strings.Contains(status, "keyCompromise") || !strings.Contains(flash, "Revoked") {
		t.Fatalf("after revoking: status %q, flash %q", status, flash)
	}

	// The list shows it revoked, and the audit log names the operator.
	navigate(t, ctx, c.adminURL+"/certs?"+url.Values{"name": {name}}.Encode())
	listed := text(t, ctx, `#certs tr[data-serial] td.status`)
	navigate(t, ctx, c.adminURL+"/audit")
	audit := text(t, ctx, "#audit")
	if !strings.Contains(listed, "revoked") {
		t.Fatalf("certificate list shows %q, want revoked", listed)
	}
	if !strings.Contains(audit, "admin:browser-test") || !strings.Contains(audit, serial) || !strings.Contains(audit, "via admin panel") {
		t.Fatalf("audit log lacks the revocation by admin:browser-test:\n%s", audit)
	}

	// The worker signs the next CRL; the frontend serves it at the
	// certificate's distribution point.
	crlNumber := waitInCRL(t, cert)

	// The CRLs page and the overview show that CRL; the overview becomes
	// the README's screenshot.
	navigate(t, ctx, c.adminURL+"/crls")
	crls := text(t, ctx, "#crls")
	navigate(t, ctx, c.adminURL+"/")
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	// Its charts count the certificate and its validation this hour.
	for sel, want := range map[string]string{"#chart-issued-desc": ": 1 in all", "#chart-validations-desc": ": 1 valid, 0 invalid"} {
		if got, err := chromedp.Run(ctx, chromedp.TextContent(sel)); err != nil || !strings.Contains(got, want) {
			t.Errorf("overview %s = %q, %v; want %q", sel, got, err, want)
		}
	}
	if !strings.Contains(crls, "fresh") || !strings.Contains(crls, crlNumber.String()) {
		t.Fatalf("CRLs page does not show CRL number %v as fresh:\n%s", crlNumber, crls)
	}
	out := filepath.Join(t.TempDir(), "admin-overview.png")
	if os.Getenv("HALLMARK_UPDATE_SCREENSHOT") == "1" {
		out = "../../docs/admin-overview.png"
	}
	if err := os.WriteFile(out, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("revoked %s from the panel; in CRL number %v; overview screenshot %s (%d bytes)", serial, crlNumber, out, len(shot))
}

// waitLocation waits until the page's URL contains sub: a form's
// submission has navigated.
func waitLocation(sub string) chromedp.Action[chromedp.Void] {
	location := chromedp.Location()
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		for {
			loc, err := location(ctx, tg)
			if err != nil {
				return err
			}
			if strings.Contains(loc, sub) {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for a URL with %q (at %s): %w", sub, loc, ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
}

func navigate(t *testing.T, ctx context.Context, u string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(u), chromedp.WaitVisible("main")); err != nil {
		t.Fatalf("opening %s: %v", u, err)
	}
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(sel))
	if err != nil {
		t.Fatalf("reading %s: %v", sel, err)
	}
	return s
}

// waitInCRL polls the certificate's CRL distribution point until the CRL
// lists it with reason keyCompromise, and returns the CRL's number.
func waitInCRL(t *testing.T, cert *x509.Certificate) *big.Int {
	t.Helper()
	return harness.WaitRevoked(t, http.DefaultClient, cert, 1)
}
