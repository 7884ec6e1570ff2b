package admin

import (
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"golang.org/x/text/language"
)

// A real OpenID provider for the tests: zitadel's OP (pkg/op) with the
// in-memory storage and login form of its example server, on loopback.

const opPassword = "correct horse battery"

// opUsers are the provider's people, by user name; each one's subject is
// "sub-" and the name.
type opUsers map[string]*storage.User

func newOPUsers(names ...string) opUsers {
	u := opUsers{}
	for _, n := range names {
		u[n] = &storage.User{ID: "sub-" + n, Username: n, Password: opPassword, FirstName: n, LastName: "Test",
			Email: n + "@ops.test", EmailVerified: true, PreferredLanguage: language.English}
	}
	return u
}

func (u opUsers) GetUserByID(id string) *storage.User {
	for _, x := range u {
		if x.ID == id {
			return x
		}
	}
	return nil
}
func (u opUsers) GetUserByUsername(name string) *storage.User { return u[name] }
func (u opUsers) ExampleClientID() string                     { return "" }

// startOP serves the provider on a loopback port and returns its issuer.
// clients maps client IDs to their secret and redirect URL.
func startOP(t *testing.T, users opUsers, clients map[string][2]string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://" + ln.Addr().String()
	cs := map[string]*storage.Client{}
	for id, c := range clients {
		cs[id] = storage.WebClient(id, c[0], c[1])
	}
	srv := httptest.NewUnstartedServer(exampleop.SetupServer(issuer, storage.NewStorageWithClients(users, cs), nil, false))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return issuer
}

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
	resp, err = c.PostForm(issuer+"/login/username", url.Values{"id": {string(m[1])}, "username": {user}, "password": {opPassword}})
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
