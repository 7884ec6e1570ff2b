package admin_test

import (
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

var noticeRE = regexp.MustCompile(`(?s)<p class="flash" id="flash">(.*?)</p>`)

// noticeOf is the text of the page's notice box ("" when there is none).
func noticeOf(page string) string {
	m := noticeRE.FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

// follow GETs the Location of a form post's 303 as a browser would: with
// the cookies the answer set (and extra ones), and auth. It returns the
// page the operator lands on.
func follow(t *testing.T, srvURL string, resp *http.Response, auth string, extra ...*http.Cookie) string {
	t.Helper()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("form post: %d, want 303", resp.StatusCode)
	}
	req, err := http.NewRequest("GET", srvURL+resp.Header.Get("Location"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range append(resp.Cookies(), extra...) {
		if c.MaxAge >= 0 {
			req.AddCookie(c)
		}
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	r, body := doReq(t, req)
	if r.StatusCode != http.StatusOK {
		t.Fatalf("GET %s after the form post: %d\n%s", resp.Header.Get("Location"), r.StatusCode, body)
	}
	return body
}

func doReq(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := (&http.Client{CheckRedirect: noRedirect}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestNoticeIsNotFromTheAddress: the notice box says only what the panel
// itself decided after an action; text in the address (?flash=, the old
// mechanism) is shown nowhere, signed in or not.
func TestNoticeIsNotFromTheAddress(t *testing.T) {
	t.Parallel()
	srv, _ := panel(t)
	c := &http.Client{CheckRedirect: noRedirect}
	spoof := "Your operator token has expired. Paste it at https://evil.example/renew to continue."
	q := "?" + url.Values{"flash": {spoof}, "notice": {spoof}, "msg": {spoof}}.Encode()
	for _, tc := range []struct{ path, auth string }{
		{"/", "Bearer " + token},
		{"/certs", "Bearer " + token},
		{"/jobs/x", "Bearer " + token}, // an error page
		{"/login", ""},
		{"/audit", ""}, // 401 with the sign-in form
	} {
		_, page := do(t, c, "GET", srv.URL+tc.path+q, tc.auth, nil)
		if strings.Contains(page, "evil.example/renew") || noticeOf(page) != "" {
			t.Errorf("GET %s shows text from the address as the panel's own:\n%s", tc.path, page)
		}
	}
}

// TestNoticeAfterAction: a form's outcome reaches the page the browser is
// sent to, once, and only for the operator who acted: a notice cookie
// replayed to another operator, or altered, shows nothing.
func TestNoticeAfterAction(t *testing.T) {
	t.Parallel()
	srv, st := panel(t)
	o := pendingOrder(t, st, "notice", "notice.example.com")
	c := &http.Client{CheckRedirect: noRedirect}
	bearer := "Bearer " + token
	acctURL := srv.URL + "/accounts/" + o.AccountID
	_, page := do(t, c, "GET", acctURL, bearer, nil)
	resp, _ := do(t, c, "POST", acctURL+"/deactivate", bearer, url.Values{"csrf": {csrfOf(t, page)}})
	if loc := resp.Header.Get("Location"); loc != "/accounts/"+o.AccountID {
		t.Fatalf("deactivate redirects to %q, want the account's page with nothing in the address", loc)
	}
	var notice *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "hallmark_admin_flash" {
			notice = ck
		}
	}
	if notice == nil || !notice.HttpOnly || notice.SameSite != http.SameSiteStrictMode || notice.MaxAge <= 0 || notice.MaxAge > 300 {
		t.Fatalf("the notice cookie = %+v; want HttpOnly, SameSite=Strict, short-lived", notice)
	}
	if got := noticeOf(follow(t, srv.URL, resp, bearer)); !strings.HasPrefix(got, "Account deactivated") {
		t.Fatalf("the account page's notice = %q, want 'Account deactivated…'", got)
	}

	altered := *notice
	altered.Value = strings.Replace(notice.Value, ".", "x.", 1)
	for _, tc := range []struct {
		name   string
		auth   string
		cookie *http.Cookie
	}{
		{"another operator", "Basic " + b64("mallory:"+token), notice},
		{"altered", bearer, &altered},
	} {
		req, _ := http.NewRequest("GET", acctURL, nil)
		req.Header.Set("Authorization", tc.auth)
		req.AddCookie(tc.cookie)
		r, page := doReq(t, req)
		if r.StatusCode != http.StatusOK || noticeOf(page) != "" {
			t.Errorf("%s: %d, notice %q; want the page without a notice", tc.name, r.StatusCode, noticeOf(page))
		}
		cleared := false
		for _, ck := range r.Cookies() {
			cleared = cleared || (ck.Name == "hallmark_admin_flash" && ck.MaxAge < 0)
		}
		if !cleared {
			t.Errorf("%s: the page did not clear the notice cookie", tc.name)
		}
	}
}
