package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/admin"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/protocol/revocation"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// TestIssuersPage: the page lists the issuers with their state and
// profiles; its form rotates the default profile to a new issuer (the old
// one retiring) and its button retires, each audited as the operator; an
// unknown issuer or a refused retirement is a notice, not a change.
func TestIssuersPage(t *testing.T) {
	t.Parallel()
	db := testdb.Open(t, "sqlite")
	st := db.Store
	p, err := admin.New(admin.Options{Store: db.Store, Queue: db.Queue, Token: token, Profiles: map[string]profile.Profile{"default": profile.Default()},
		Revoker: revocation.New(db.Store, map[string]profile.Profile{"default": profile.Default()})})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p.Handler())
	t.Cleanup(srv.Close)
	ctx := context.Background()
	now, _ := st.Now(ctx)
	for _, id := range []string{"aa01", "bb02"} {
		if err := st.IssuerRecordPut(ctx, store.IssuerRecord{ID: id, Name: "CA " + id, KeyType: "p256", NotAfter: now.Add(time.Hour)}, []byte{0x30, 0x00}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.ProfileIssuerDefault(ctx, "default", "aa01"); err != nil {
		t.Fatal(err)
	}
	c := &http.Client{CheckRedirect: noRedirect}
	bearer := "Bearer " + token
	_, page := do(t, c, "GET", srv.URL+"/issuers", bearer, nil)
	if !strings.Contains(page, "<code>aa01</code>") || !strings.Contains(page, `id="rotate"`) {
		t.Fatalf("the issuers page lists no issuer or offers no rotation:\n%s", page)
	}
	csrf := csrfOf(t, page)
	resp, _ := do(t, c, "POST", srv.URL+"/issuers/rotate", bearer, url.Values{"csrf": {csrf}, "profile": {"default"}, "issuer": {"nope"}})
	if got := noticeOf(follow(t, srv.URL, resp, bearer)); !strings.HasPrefix(got, "Not rotated") {
		t.Fatalf("rotating to an unknown issuer: the page says %q", got)
	}
	resp, _ = do(t, c, "POST", srv.URL+"/issuers/rotate", bearer, url.Values{"csrf": {csrf}, "profile": {"default"}, "issuer": {"bb02"}})
	if got := noticeOf(follow(t, srv.URL, resp, bearer)); !strings.HasPrefix(got, "Rotated") || !strings.Contains(got, "Retiring: aa01") {
		t.Fatalf("rotating: the page says %q", got)
	}
	m, err := st.ProfileIssuers(ctx)
	if err != nil || len(m["default"]) != 1 || m["default"][0].ID != "bb02" {
		t.Fatalf("after the rotation default signs with %+v, %v; want bb02", m["default"], err)
	}
	resp, _ = do(t, c, "POST", srv.URL+"/issuers/bb02/retire", bearer, url.Values{"csrf": {csrf}})
	if got := noticeOf(follow(t, srv.URL, resp, bearer)); !strings.HasPrefix(got, "Not retired") {
		t.Fatalf("retiring the issuer a profile names: the page says %q", got)
	}
	resp, _ = do(t, c, "POST", srv.URL+"/issuers/aa01/retire", bearer, url.Values{"csrf": {csrf}})
	if got := noticeOf(follow(t, srv.URL, resp, bearer)); got != "Issuer aa01 is retired." {
		t.Fatalf("retiring the retiring issuer with no certificate: the page says %q", got)
	}
	evs, _, err := st.AuditList(ctx, store.Page{})
	if err != nil || len(evs) < 2 || evs[0].Action != "issuer.retire" || evs[1].Action != "issuer.rotate" || evs[0].Actor != "admin:token" {
		t.Fatalf("audit = %+v, %v; want issuer.retire after issuer.rotate by admin:token", evs, err)
	}
}
