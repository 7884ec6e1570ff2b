package admin

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/tests/oidcop"
)

// browserClient keeps cookies and stops at any address under stopAt,
// returning that redirect unfollowed.
func browserClient(t *testing.T, stopAt string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(r.URL.String(), stopAt) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
}

var loginID = regexp.MustCompile(`name="id" value="([^"]+)"`)

// signInAtOP follows start (an authorization request, or the panel's
// button) to the provider's login form, signs in as user, and returns
// where the provider sends the browser back (under stopAt), unfollowed.
func signInAtOP(t *testing.T, c *http.Client, issuer, start, user string) *url.URL {
	t.Helper()
	resp, err := c.Get(start)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := loginID.FindSubmatch(body)
	if m == nil {
		t.Fatalf("GET %s ended at %s (%d), not the provider's login form:\n%s", start, resp.Request.URL, resp.StatusCode, body)
	}
	resp, err = c.PostForm(issuer+"/login/username", url.Values{"id": {string(m[1])}, "username": {user}, "password": {oidcop.Password}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if resp.StatusCode/100 != 3 || err != nil {
		t.Fatalf("signing in as %s at the provider: %d, %v", user, resp.StatusCode, err)
	}
	return loc
}
