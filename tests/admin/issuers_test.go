package admin

import (
	"crypto/x509"
	"encoding/hex"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/hallmark-ca/hallmark/tests/harness"
)

// TestBrowserCreateIssuer: an admin creates an intermediate from the
// issuers page of the real frontend. The frontend runs the real
// hallmark-worker beside it, which writes the key into ca.dir and records
// the issuer: the page lists it, the audit log names the admin, and the new
// intermediate names its root's CRL, which the frontend serves signed by
// the root.
func TestBrowserCreateIssuer(t *testing.T) {
	ctx := browser(t)
	c := startCA(t)
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
	const name = "Browser Intermediate E2"
	navigate(t, ctx, c.adminURL+"/issuers")
	if err := chromedp.Do(ctx,
		chromedp.SendKeys("#create-name", name),
		chromedp.SetValue("#create-key", "p384"),
		chromedp.Click("#create-issuer"),
		chromedp.WaitVisible("#flash"),
	); err != nil {
		t.Fatalf("creating an issuer: %v", err)
	}
	flash := text(t, ctx, "#flash")
	m := regexp.MustCompile(`Created issuer ([0-9a-f]+) `).FindStringSubmatch(flash)
	if m == nil {
		t.Fatalf("after creating: the notice says %q", flash)
	}
	id := m[1]
	if listed := text(t, ctx, "#issuers"); !strings.Contains(listed, id) || !strings.Contains(listed, name) || !strings.Contains(listed, "p384") {
		t.Fatalf("the issuers page does not list %s (%s, p384):\n%s", id, name, listed)
	}
	navigate(t, ctx, c.adminURL+"/audit")
	if audit := text(t, ctx, "#audit"); !strings.Contains(audit, "issuer.create") || !strings.Contains(audit, "admin:browser-test") || !strings.Contains(audit, id) {
		t.Fatalf("the audit log lacks issuer.create of %s by admin:browser-test:\n%s", id, audit)
	}

	inter := harness.ReadCert(t, filepath.Join(c.Dir, "ca", "issuers", id+".pem"))
	root := harness.ReadCert(t, filepath.Join(c.Dir, "ca", "root.pem"))
	if got := hex.EncodeToString(inter.SubjectKeyId); got != id || inter.CheckSignatureFrom(root) != nil {
		t.Fatalf("ca.dir/issuers/%s.pem is %s, signed by %s; want the new issuer under the root", id, got, inter.Issuer.CommonName)
	}
	if len(inter.CRLDistributionPoints) != 1 || !strings.HasSuffix(inter.CRLDistributionPoints[0], "/crl/"+hex.EncodeToString(root.SubjectKeyId)) {
		t.Fatalf("the new intermediate names the CRLs %v; want its root's", inter.CRLDistributionPoints)
	}
	resp, err := http.Get(inter.CRLDistributionPoints[0])
	if err != nil {
		t.Fatal(err)
	}
	der, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	crl, err := x509.ParseRevocationList(der)
	if err != nil || crl.CheckSignatureFrom(root) != nil {
		t.Fatalf("GET %s: %d, %v; want a CRL the root signed", inter.CRLDistributionPoints[0], resp.StatusCode, err)
	}
	t.Logf("created issuer %s from the panel; its root's CRL number %v is served", id, crl.Number)
}
