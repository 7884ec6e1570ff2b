package admin_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/admin"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/protocol/revocation"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// TestPanelShowsVersion: a signed-in operator sees the frontend's version
// at the foot of every page; the public login page does not name it, and a
// panel given no version shows no footer.
func TestPanelShowsVersion(t *testing.T) {
	t.Parallel()
	const v = "v1.4.2-3-g0123abc (commit 0123abc, built 2026-01-02T03:04:05Z, go1.26.8)"
	db := testdb.Open(t, "sqlite")
	for _, version := range []string{v, ""} {
		p, err := admin.New(admin.Options{Store: db.Store, Queue: db.Queue, Token: token, Version: version,
			Revoker: revocation.New(db.Store, map[string]profile.Profile{"default": profile.Default()})})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(p.Handler())
		defer srv.Close()
		c := &http.Client{CheckRedirect: noRedirect}
		for _, path := range []string{"/", "/certs", "/jobs"} {
			_, body := do(t, c, "GET", srv.URL+path, "Bearer "+token, nil)
			footer := `<footer id="version">Hallmark ` + v + `</footer>`
			if got := strings.Contains(body, footer); got != (version != "") {
				t.Errorf("panel with version %q: %s shows %s: %v\n%s", version, path, footer, got, body)
			}
		}
		if _, body := do(t, c, "GET", srv.URL+"/login", "", nil); strings.Contains(body, "footer") {
			t.Errorf("the login page shows a version to someone not signed in:\n%s", body)
		}
	}
}
