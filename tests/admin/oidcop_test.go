package admin

import (
	"net"
	"net/http/httptest"
	"testing"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"golang.org/x/text/language"
)

// A real OpenID provider for the browser: zitadel's OP (pkg/op) with the
// in-memory storage and login form of its example server, on loopback.

const opPassword = "correct horse battery"

// opUsers are the provider's people by user name; each one's subject is
// "sub-" and the name, their email the name at ops.test.
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

// startOP serves the provider on a loopback port under the issuer
// http://HOST:port and returns the issuer; clientID's secret and
// redirect URL are registered. host "localhost" puts the provider on
// another site than a panel on 127.0.0.1, as a real provider is.
func startOP(t *testing.T, host string, users opUsers, clientID, secret, redirect string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	issuer := "http://" + net.JoinHostPort(host, port)
	st := storage.NewStorageWithClients(users, map[string]*storage.Client{clientID: storage.WebClient(clientID, secret, redirect)})
	srv := httptest.NewUnstartedServer(exampleop.SetupServer(issuer, st, nil, false))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return issuer
}
