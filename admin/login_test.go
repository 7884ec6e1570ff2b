package admin_test

import (
	"html"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/tests/testdb"
)

var nextFieldRE = regexp.MustCompile(`name="next" value="([^"]*)"`)

// signIn follows the link /login?next=NEXT in a fresh browser-like client:
// it loads the sign-in form (which carries next into a hidden field) and
// submits it with the operator token. It returns the client, holding the
// session cookie, and the sign-in response, unfollowed.
func signIn(t *testing.T, srvURL, user, next string) (*http.Client, *http.Response) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: noRedirect}
	u := srvURL + "/login"
	if next != "" {
		u += "?" + url.Values{"next": {next}}.Encode()
	}
	_, page := do(t, c, "GET", u, "", nil)
	m := nextFieldRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no next field in the sign-in form:\n%s", page)
	}
	resp, body := do(t, c, "POST", srvURL+"/login", "", url.Values{"user": {user}, "token": {token}, "csrf": {csrfOf(t, page)}, "next": {html.UnescapeString(m[1])}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in: %d, want 303\n%s", resp.StatusCode, body)
	}
	return c, resp
}

// browserResolve resolves a Location header against base as a browser
// does (WHATWG URL Standard): tabs and newlines are dropped and, in an
// http(s) URL, a backslash is a slash.
func browserResolve(base *url.URL, loc string) (*url.URL, error) {
	loc = strings.NewReplacer("\t", "", "\n", "", "\r", "", `\`, "/").Replace(loc)
	return base.Parse(loc)
}

// TestSignInRedirectStaysOnPanel: whatever `next` a link carries into the
// sign-in form, the browser is sent to a page of this panel. The notes say
// what http.Redirect makes of each payload (it cleans the path), which is
// why the panel writes Location itself from the path it judged.
func TestSignInRedirectStaysOnPanel(t *testing.T) {
	t.Parallel()
	srv, _ := panel(t)
	base, _ := url.Parse(srv.URL + "/login")
	for _, tc := range []struct {
		next string
		want string // the exact Location; "/" when next is refused
	}{
		{`/a/../\evil.example/`, "/"},                    // http.Redirect: "/\evil.example/", which a browser opens as //evil.example/
		{`/./\evil.example/`, "/"},                       // http.Redirect: "/\evil.example/"
		{`/x/..\/evil.example/`, "/"},                    // http.Redirect leaves it; a browser reads "/x/../evil.example/"
		{`/\evil.example/`, "/"},                         // a browser reads "//evil.example/"
		{"/\t/evil.example/", "/"},                       // http.Redirect keeps the tab; a browser drops it: "//evil.example/"
		{`//evil.example/`, "/"},                         // scheme-relative
		{`///evil.example/`, "/"},                        // http.Redirect cleans it to "/evil.example/"
		{`/a/..//evil.example/`, "/evil.example/"},       // cleans to a path of this panel
		{`https://evil.example/`, "/"},                   // absolute
		{`evil.example`, "/"},                            // relative
		{`/%2F%2Fevil.example/`, "/%2F%2Fevil.example/"}, // one path segment on this panel
		{`/certs?name=a.example.com&revoked=yes`, "/certs?name=a.example.com&revoked=yes"},
		{`/jobs/12#attempts`, "/jobs/12"},
		{`/orders/../audit`, "/audit"},
		{``, "/"},
	} {
		t.Run(tc.next, func(t *testing.T) {
			_, resp := signIn(t, srv.URL, "alice", tc.next)
			loc := resp.Header.Get("Location")
			target, err := browserResolve(base, loc)
			if err != nil || target.Scheme != base.Scheme || target.Host != base.Host {
				t.Fatalf("next=%q: Location %q, which a browser opens as %v (%v): off the panel", tc.next, loc, target, err)
			}
			if loc != tc.want {
				t.Fatalf("next=%q: Location %q, want %q", tc.next, loc, tc.want)
			}
		})
	}
}

// TestSignOutEndsTheSessionOnEveryReplica: two panels on one database (two
// frontend replicas) accept the same session, and signing out on one ends
// it on both, for a copy of the cookie too; the other sessions go on.
func TestSignOutEndsTheSessionOnEveryReplica(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			db := testdb.Open(t, kind)
			var replicas []string
			for range 2 {
				replicas = append(replicas, serve(t, db).URL)
			}
			alice, _ := signIn(t, replicas[0], "alice", "/")
			bob, _ := signIn(t, replicas[0], "bob", "/")
			cookieOf := func(c *http.Client) *http.Cookie {
				u, _ := url.Parse(replicas[0])
				for _, ck := range c.Jar.Cookies(u) {
					if ck.Name == "hallmark_admin_session" {
						return ck
					}
				}
				t.Fatal("no session cookie")
				return nil
			}
			aliceCookie, bobCookie := cookieOf(alice), cookieOf(bob)
			status := func(replica string, ck *http.Cookie) int {
				req, _ := http.NewRequest("GET", replica+"/audit", nil)
				req.AddCookie(ck)
				resp, _ := doReq(t, req)
				return resp.StatusCode
			}
			for _, r := range replicas {
				if got := status(r, aliceCookie); got != http.StatusOK {
					t.Fatalf("alice's session on %s: %d, want 200", r, got)
				}
			}
			// Alice signs out on the second replica.
			req, _ := http.NewRequest("GET", replicas[1]+"/", nil)
			req.AddCookie(aliceCookie)
			_, page := doReq(t, req)
			req, _ = http.NewRequest("POST", replicas[1]+"/logout", strings.NewReader(url.Values{"csrf": {csrfOf(t, page)}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.AddCookie(aliceCookie)
			if resp, body := doReq(t, req); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("logout: %d\n%s", resp.StatusCode, body)
			}
			for _, r := range replicas {
				if got := status(r, aliceCookie); got != http.StatusUnauthorized {
					t.Errorf("alice's signed-out cookie on %s: %d, want 401", r, got)
				}
				if got := status(r, bobCookie); got != http.StatusOK {
					t.Errorf("bob's session on %s after alice signed out: %d, want 200", r, got)
				}
			}
		})
	}
}
