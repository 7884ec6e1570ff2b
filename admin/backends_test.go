package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/admin"
	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/protocol/revocation"
	"github.com/hallmark-ca/hallmark/signer/custom"
	"github.com/hallmark-ca/hallmark/signer/signerconf"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/tests/testdb"
	"github.com/hallmark-ca/hallmark/tests/testworker"
	"github.com/hallmark-ca/hallmark/worker"
)

var relayRowRE = regexp.MustCompile(`(?s)<code>relay:corp</code>.*?</tr>`)

// TestRevokeRelayCertificate: the panel revokes a relay's certificate
// through its backend and says so. Its page offers the revocation as queued
// for the relay; when the backend confirms within the panel's wait, the
// notice says the relay revoked it, not that "the issuer's next CRL" will
// list it (Hallmark signs no CRL for relay:corp, and the CRLs page links
// none); no revocation row is written.
func TestRevokeRelayCertificate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Open(t, "sqlite")
	st := db.Store
	profiles := map[string]profile.Profile{"default": profile.Default(), "upstream": {Backend: "relay", Signer: "corp"}}
	srv := servedWith(t, db, profiles)

	issuedCert(t, st, "e1", "relayed.example.com", "relay:corp", "upstream")

	c := &http.Client{CheckRedirect: noRedirect}
	bearer := "Bearer " + token
	_, page := do(t, c, "GET", srv.URL+"/certs/e1", bearer, nil)
	if !strings.Contains(page, "The relay backend issued this certificate") {
		t.Errorf("the certificate page does not say the relay revokes it:\n%s", page)
	}
	// A stand-in worker: the relay confirms while the panel waits.
	go func() {
		time.Sleep(300 * time.Millisecond)
		_ = st.RevokeRecorded(ctx, "e1", 4, store.AuditEvent{Actor: "worker:test", Action: "revoke.backend", Subject: "e1"})
	}()
	resp, _ := do(t, c, "POST", srv.URL+"/certs/e1/revoke", bearer, url.Values{"csrf": {csrfOf(t, page)}, "reason": {"4"}})
	flash := noticeOf(follow(t, srv.URL, resp, bearer))
	if strings.Contains(flash, "CRL") || !strings.Contains(flash, "relay backend") {
		t.Errorf("after the relay confirmed, the notice says %q; want the relay backend named and no CRL of ours", flash)
	}
	if got, err := st.CertificateBySerial(ctx, "e1"); err != nil || got.RevokedAt == nil {
		t.Fatalf("certificate after the revocation = %+v, %v; want revoked", got, err)
	}
	if revs, err := st.Revocations(ctx, "relay:corp"); err != nil || len(revs) != 0 {
		t.Errorf("revocation rows of relay:corp = %+v, %v; want none", revs, err)
	}
	_, page = do(t, c, "GET", srv.URL+"/crls", bearer, nil)
	row := relayRowRE.FindString(page)
	if row == "" || strings.Contains(row, "<a ") || strings.Contains(row, "never signed") || strings.Contains(row, `class="bad"`) {
		t.Errorf("the CRLs page's row for relay:corp links or flags a CRL Hallmark never signs:\n%s", row)
	}
	// Its revoked count is its revoked certificates', as `crl status`'s.
	if !strings.Contains(row, `<td class="n">1</td><td class="n">0</td>`) {
		t.Errorf("the CRLs page's row for relay:corp does not count its 1 revoked certificate (and 0 not listed):\n%s", row)
	}
}

// TestRevokeRefusedByTheBackend: when the custom backend that issued a
// certificate refuses its revocation, the panel's notice says so, naming
// the backend and quoting its reason, as a real worker running a real hook
// hears it; the certificate stays unrevoked.
func TestRevokeRefusedByTheBackend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Open(t, "sqlite")
	st := db.Store
	dir := t.TempDir()
	hook := filepath.Join(dir, "revoke.sh")
	if err := os.WriteFile(hook, []byte(`cat > /dev/null; echo '{"error": {"type": "unauthorized", "detail": "certificate is under legal hold"}}'`), 0o700); err != nil {
		t.Fatal(err)
	}
	hooks, err := custom.New(custom.Config{Name: "hooks", Timeout: 5 * time.Second,
		Custom: signerconf.Custom{IssueCommand: []string{"false"}, RevokeCommand: []string{"sh", hook}}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := testworker.Config(map[string]profile.Profile{"hooked": {Backend: "custom", Signer: "hooks", ValidityHours: 240}}, "127.0.0.1:1")
	w, err := worker.New(cfg, st, worker.Options{Backends: map[string]worker.Backend{"hooked": hooks}})
	if err != nil {
		t.Fatal(err)
	}
	testworker.Serve(t, w, db.Queue, nil, jobs.ProfileQueue("hooked"))
	srv := servedWith(t, db, cfg.Profiles)
	issuedCert(t, st, "e7", "hooked.example.com", "custom:hooks", "hooked")

	c := &http.Client{CheckRedirect: noRedirect}
	bearer := "Bearer " + token
	_, page := do(t, c, "GET", srv.URL+"/certs/e7", bearer, nil)
	resp, _ := do(t, c, "POST", srv.URL+"/certs/e7/revoke", bearer, url.Values{"csrf": {csrfOf(t, page)}, "reason": {"4"}})
	flash := noticeOf(follow(t, srv.URL, resp, bearer))
	if !strings.Contains(flash, "refused by the custom backend: certificate is under legal hold") {
		t.Errorf("after the hooks refused, the notice says %q; want the refusal, naming the backend and quoting it", flash)
	}
	if got, err := st.CertificateBySerial(ctx, "e7"); err != nil || got.RevokedAt != nil {
		t.Fatalf("certificate after a refusal = %+v, %v; want unrevoked", got, err)
	}
}

// servedWith serves a panel on db whose revocations know profiles' backends
// and are waited on for up to 10 s, with CRLs linked under crl.example.
func servedWith(t *testing.T, db *open.DB, profiles map[string]profile.Profile) *httptest.Server {
	t.Helper()
	p, err := admin.New(admin.Options{Store: db.Store, Queue: db.Queue, Token: token, CRLBase: "http://crl.example",
		Revoker: revocation.New(db.Store, profiles), RevokeWait: 10 * time.Second, Profiles: profiles})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p.Handler())
	t.Cleanup(srv.Close)
	return srv
}
