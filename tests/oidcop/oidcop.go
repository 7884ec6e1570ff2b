// Package oidcop is a real OpenID provider for tests: zitadel's OP
// (pkg/op) with the in-memory storage and login form of its example
// server, on loopback.
package oidcop

import (
	"net"
	"net/http/httptest"
	"testing"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"golang.org/x/text/language"
)

// Password is every user's password.
const Password = "correct horse battery"

// Users are the provider's people by user name; each one's subject is
// "sub-" and the name, their email the name at ops.test.
type Users map[string]*storage.User

// NewUsers is Users of names.
func NewUsers(names ...string) Users {
	u := Users{}
	for _, n := range names {
		u[n] = &storage.User{ID: "sub-" + n, Username: n, Password: Password, FirstName: n, LastName: "Test",
			Email: n + "@ops.test", EmailVerified: true, PreferredLanguage: language.English}
	}
	return u
}

func (u Users) GetUserByID(id string) *storage.User {
	for _, x := range u {
		if x.ID == id {
			return x
		}
	}
	return nil
}
func (u Users) GetUserByUsername(name string) *storage.User { return u[name] }
func (u Users) ExampleClientID() string                     { return "" }

// Start serves the provider on a loopback port under the issuer
// http://host:port and returns the issuer; clients maps client IDs to
// their secret and redirect URL. Host "localhost" puts the provider on
// another site than a panel on 127.0.0.1, as a real provider is.
func Start(t *testing.T, host string, users Users, clients map[string][2]string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	issuer := "http://" + net.JoinHostPort(host, port)
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
