package admin_test

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/admin"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/protocol/revocation"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/store/storetest"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

const token = "test-operator-token-0123456789abcdef"

// panel serves the admin panel over a real, migrated SQLite store on a
// loopback listener.
func panel(t *testing.T) (*httptest.Server, store.Store) {
	t.Helper()
	return panelOn(t, "sqlite")
}

// panelOn is panel on a store of kind ("sqlite" or "postgres").
func panelOn(t *testing.T, kind string) (*httptest.Server, store.Store) {
	t.Helper()
	db := testdb.Open(t, kind)
	return serve(t, db), db.Store
}

// serve runs a panel on db, its store and its queue, as a frontend does;
// a test calls it again for a second replica on the same database.
func serve(t *testing.T, db *open.DB) *httptest.Server {
	t.Helper()
	p, err := admin.New(admin.Options{Store: db.Store, Queue: db.Queue, Token: token,
		Revoker: revocation.New(db.Store, map[string]profile.Profile{"default": profile.Default()})})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p.Handler())
	t.Cleanup(srv.Close)
	return srv
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func do(t *testing.T, c *http.Client, method, u, auth string, form url.Values) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", page)
	}
	return m[1]
}

func TestRefusesWithoutCredentials(t *testing.T) {
	t.Parallel()
	srv, _ := panel(t)
	c := &http.Client{CheckRedirect: noRedirect}
	for _, tc := range []struct {
		name, method, path, auth string
		want                     int
	}{
		{"no credentials", "GET", "/", "", 401},
		{"no credentials, a list", "GET", "/certs", "", 401},
		{"no credentials, a form post", "POST", "/certs/abcd/revoke", "", 401},
		{"wrong bearer", "GET", "/", "Bearer not-the-token-at-all-nope", 401},
		{"wrong basic password", "GET", "/", "Basic " + b64("alice:wrong"), 401},
		{"bearer", "GET", "/", "Bearer " + token, 200},
		{"basic with the token as password", "GET", "/jobs", "Basic " + b64("alice:"+token), 200},
		{"login page is public", "GET", "/login", "", 200},
		{"static is public", "GET", "/static/style.css", "", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var form url.Values
			if tc.method == "POST" {
				form = url.Values{"reason": {"4"}}
			}
			resp, body := do(t, c, tc.method, srv.URL+tc.path, tc.auth, form)
			if resp.StatusCode != tc.want {
				t.Fatalf("%s %s: status %d, want %d\n%s", tc.method, tc.path, resp.StatusCode, tc.want, body)
			}
			if tc.want == 401 && !strings.Contains(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("401 without a WWW-Authenticate challenge: %v", resp.Header)
			}
			if tc.want == 401 && strings.Contains(body, "Overview") {
				t.Fatalf("a refused request saw the panel:\n%s", body)
			}
		})
	}
}

// TestRefusesForgedSession: a session cookie the panel did not mint (a
// payload that never expires, with a made-up MAC) is refused like no
// credentials; the MAC and expiry rules are TestSessionCookie's.
func TestRefusesForgedSession(t *testing.T) {
	t.Parallel()
	srv, _ := panel(t)
	forged := base64.RawURLEncoding.EncodeToString([]byte("alice|forged-session-id|99999999999")) + "." + base64.RawURLEncoding.EncodeToString(make([]byte, 32))
	for _, path := range []string{"/", "/audit"} {
		req, err := http.NewRequest("GET", srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.AddCookie(&http.Cookie{Name: "hallmark_admin_session", Value: forged})
		resp, err := (&http.Client{CheckRedirect: noRedirect}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || strings.Contains(string(body), "Overview") {
			t.Fatalf("GET %s with a forged session: status %d, want 401\n%s", path, resp.StatusCode, body)
		}
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestFormPostNeedsCSRF(t *testing.T) {
	t.Parallel()
	srv, st := panel(t)
	c := &http.Client{CheckRedirect: noRedirect}
	bearer := "Bearer " + token
	_, page := do(t, c, "GET", srv.URL+"/", bearer, nil)
	good := csrfOf(t, page)
	for _, tc := range []struct {
		name string
		form url.Values
		want int
	}{
		{"no token", url.Values{"reason": {"4"}}, 403},
		{"wrong token", url.Values{"reason": {"4"}, "csrf": {"AAAA" + good[4:]}}, 403},
		{"the principal's token", url.Values{"reason": {"4"}, "csrf": {good}}, 303},
	} {
		resp, body := do(t, c, "POST", srv.URL+"/certs/abcd/revoke", bearer, tc.form)
		if resp.StatusCode != tc.want {
			t.Fatalf("%s: status %d, want %d\n%s", tc.name, resp.StatusCode, tc.want, body)
		}
	}
	// A post with the right token from another origin is refused too.
	req, _ := http.NewRequest("POST", srv.URL+"/jobs/1/retry", strings.NewReader(url.Values{"csrf": {good}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", bearer)
	req.Header.Set("Origin", "http://evil.example")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Fatalf("cross-origin post: status %d, want 403", resp.StatusCode)
	}
	// The refused revocations changed nothing and recorded nothing.
	if evs, _, err := st.AuditList(context.Background(), store.Page{}); err != nil || len(evs) != 0 {
		t.Fatalf("audit events after refused posts: %+v, %v", evs, err)
	}
}

// TestLoginSession: the login form trades the token for a session cookie;
// the session's forms carry its own CSRF token, a wrong token is refused,
// and login and logout are audited.
func TestLoginSession(t *testing.T) {
	t.Parallel()
	srv, st := panel(t)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: noRedirect}
	_, page := do(t, c, "GET", srv.URL+"/login", "", nil)
	loginCSRF := csrfOf(t, page)

	resp, _ := do(t, c, "POST", srv.URL+"/login", "", url.Values{"user": {"alice"}, "token": {token}})
	if resp.StatusCode != 403 {
		t.Fatalf("login without its CSRF token: %d, want 403", resp.StatusCode)
	}
	resp, _ = do(t, c, "POST", srv.URL+"/login", "", url.Values{"user": {"alice"}, "token": {"wrong-token-wrong-token"}, "csrf": {loginCSRF}})
	if resp.StatusCode != 401 {
		t.Fatalf("login with a wrong token: %d, want 401", resp.StatusCode)
	}
	resp, _ = do(t, c, "POST", srv.URL+"/login", "", url.Values{"user": {"alice"}, "token": {token}, "csrf": {loginCSRF}, "next": {"//evil.example/"}})
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/" {
		t.Fatalf("login: %d to %q, want 303 to /", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, page = do(t, c, "GET", srv.URL+"/", "", nil)
	if resp.StatusCode != 200 || !strings.Contains(page, "alice") {
		t.Fatalf("overview after login: %d\n%s", resp.StatusCode, page)
	}
	sessionCSRF := csrfOf(t, page)
	if sessionCSRF == loginCSRF {
		t.Fatal("the session's CSRF token is the login form's")
	}
	u, _ := url.Parse(srv.URL)
	var session *http.Cookie
	for _, ck := range jar.Cookies(u) {
		if ck.Name == "hallmark_admin_session" {
			session = ck
		}
	}
	if session == nil {
		t.Fatal("no session cookie after login")
	}
	resp, _ = do(t, c, "POST", srv.URL+"/logout", "", url.Values{"csrf": {loginCSRF}})
	if resp.StatusCode != 403 {
		t.Fatalf("logout with the login form's token: %d, want 403", resp.StatusCode)
	}
	resp, _ = do(t, c, "POST", srv.URL+"/logout", "", url.Values{"csrf": {sessionCSRF}})
	if resp.StatusCode != 303 {
		t.Fatalf("logout: %d, want 303", resp.StatusCode)
	}
	if resp, _ = do(t, c, "GET", srv.URL+"/", "", nil); resp.StatusCode != 401 {
		t.Fatalf("overview after logout: %d, want 401", resp.StatusCode)
	}
	// A copy of the cookie, replayed after the logout, opens nothing.
	req, _ := http.NewRequest("GET", srv.URL+"/", nil)
	req.AddCookie(session)
	if resp, err := (&http.Client{CheckRedirect: noRedirect}).Do(req); err != nil || resp.StatusCode != 401 {
		t.Fatalf("the signed-out session cookie replayed: %v %v, want 401", resp.StatusCode, err)
	} else {
		resp.Body.Close()
	}
	evs, _, err := st.AuditList(context.Background(), store.Page{})
	if err != nil || len(evs) != 2 || evs[0].Action != "admin.logout" || evs[1].Action != "admin.login" || evs[1].Actor != "admin:alice" {
		t.Fatalf("audit = %+v, %v; want login then logout by admin:alice", evs, err)
	}
}

// TestPagesRender: every page renders for an empty store.
func TestPagesRender(t *testing.T) {
	t.Parallel()
	srv, _ := panel(t)
	c := &http.Client{CheckRedirect: noRedirect}
	for _, p := range []string{"/", "/accounts", "/orders?status=valid", "/certs?revoked=yes", "/jobs?state=available", "/crls", "/keys", "/pauses", "/issuers", "/audit"} {
		resp, body := do(t, c, "GET", srv.URL+p, "Bearer "+token, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d\n%s", p, resp.StatusCode, body)
		}
	}
	for _, p := range []string{"/certs/ffff", "/orders/nope", "/accounts/nope", "/jobs/999999", "/jobs/x", "/audit?after=bogus"} {
		if resp, body := do(t, c, "GET", srv.URL+p, "Bearer "+token, nil); resp.StatusCode != 404 {
			t.Fatalf("GET %s: %d, want 404\n%s", p, resp.StatusCode, body)
		}
	}
}

// TestOddAddresses: a record ID or filter with a NUL or invalid UTF-8 is
// the operator's typo, 400, on PostgreSQL too, which refuses such text as
// a parameter (it was a logged "could not read the store" 500 there).
func TestOddAddresses(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			srv, _ := panelOn(t, kind)
			c := &http.Client{CheckRedirect: noRedirect}
			for _, p := range []string{"/orders/a%00b", "/accounts/%FF", "/certs/%00", "/orders?status=%00", "/certs?name=a%FFb", "/jobs?kind=%00", "/audit?kind=%00", "/audit?request=%FF"} {
				if resp, body := do(t, c, "GET", srv.URL+p, "Bearer "+token, nil); resp.StatusCode != http.StatusBadRequest {
					t.Errorf("GET %s: %d, want 400\n%s", p, resp.StatusCode, body)
				}
			}
		})
	}
}

// TestAbandonJob: abandoning a waiting challenge_validate job from the
// panel fails the challenge with serverInternal (the client polling it gets
// an answer), shows the error on the order's page, and is audited.
// pendingOrder is a new account (its key named by seed) with a pending
// order for name, one http-01 challenge.
func pendingOrder(t *testing.T, st store.Store, seed, name string) *store.Order {
	t.Helper()
	ctx := context.Background()
	acct, err := st.AccountCreate(ctx, &store.Account{KeyJWK: []byte(`{"kty":"OKP","crv":"Ed25519","x":"` + seed + `"}`), Thumbprint: seed + "-thumb", TermsAgreed: true})
	if err != nil {
		t.Fatal(err)
	}
	now, err := st.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := acme.Identifier{Type: acme.IdentifierDNS, Value: name}
	o, err := st.OrderCreate(ctx, store.SignedUse{}, store.NewOrder{AccountID: acct.ID, Profile: "default", Expires: now.Add(time.Hour), Identifiers: []acme.Identifier{id},
		Authzs: []*store.Authorization{{Identifier: id, Expires: now.Add(time.Hour), Challenges: []store.Challenge{{Type: acme.ChallengeHTTP01}}}}})

	if err != nil {
		t.Fatal(err)
	}
	return o
}

// claimed claims o's challenge, as a client's challenge POST does, and
// returns it and the challenge_validate job that claim queued (the only
// one in the panel's database).
func claimed(t *testing.T, st store.Store, o *store.Order) (challengeID string, jobID int64) {
	t.Helper()
	challengeID = claim(t, st, o)
	ids, _, err := st.JobIDs(context.Background(), store.JobFilter{Kind: "challenge_validate"}, store.Page{})
	if err != nil || len(ids) != 1 {
		t.Fatalf("JobIDs = %v, %v", ids, err)
	}
	return challengeID, ids[0]
}

// claim claims o's challenge, as a client's challenge POST does, and
// returns it.
func claim(t *testing.T, st store.Store, o *store.Order) string {
	t.Helper()
	ctx := context.Background()
	az, err := st.AuthzByID(ctx, o.AuthzIDs[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.ChallengeClaim(ctx, store.SignedUse{}, az.Challenges[0].ID); err != nil || !ok {
		t.Fatalf("ChallengeClaim: %v %v", ok, err)
	}
	return az.Challenges[0].ID
}

func TestAbandonJob(t *testing.T) {
	t.Parallel()
	srv, st := panel(t)
	ctx := context.Background()
	o := pendingOrder(t, st, "abandon", "stuck.example.com")
	challengeID, jobID := claimed(t, st, o)
	c := &http.Client{CheckRedirect: noRedirect}
	bearer := "Bearer " + token
	jobURL := srv.URL + "/jobs/" + strconv.FormatInt(jobID, 10)
	_, page := do(t, c, "GET", jobURL, bearer, nil)
	if !strings.Contains(page, `id="abandon"`) {
		t.Fatalf("the job page offers no abandon button:\n%s", page)
	}
	resp, body := do(t, c, "POST", jobURL+"/abandon", bearer, url.Values{"csrf": {csrfOf(t, page)}})
	if resp.StatusCode != 303 {
		t.Fatalf("abandon: %d\n%s", resp.StatusCode, body)
	}
	ch, err := storetest.ChallengeByID(ctx, st, challengeID)
	if err != nil || ch.Status != acme.StatusInvalid || ch.Error == nil || ch.Error.Type != acme.ProblemServerInternal {
		t.Fatalf("challenge after abandon = %+v, %v; want invalid with serverInternal", ch, err)
	}
	if _, page = do(t, c, "GET", srv.URL+"/orders/"+o.ID, bearer, nil); !strings.Contains(page, "abandoned this work") {
		t.Fatalf("the order page does not show the error the client sees:\n%s", page)
	}
	evs, _, err := st.AuditList(ctx, store.Page{})
	if err != nil || len(evs) == 0 || evs[0].Action != "job.abandon" || evs[0].Actor != "admin:token" {
		t.Fatalf("audit = %+v, %v; want job.abandon by admin:token first", evs, err)
	}
}

// TestDeactivateAccount: the account page's button deactivates the account
// through the operator code path: its pending order becomes invalid, the
// event is audited, and a second press says there is nothing to do.
func TestDeactivateAccount(t *testing.T) {
	t.Parallel()
	srv, st := panel(t)
	ctx := context.Background()
	o := pendingOrder(t, st, "deactivate", "pending.example.com")
	acctID := o.AccountID
	c := &http.Client{CheckRedirect: noRedirect}
	bearer := "Bearer " + token
	acctURL := srv.URL + "/accounts/" + acctID
	_, page := do(t, c, "GET", acctURL, bearer, nil)
	if !strings.Contains(page, `id="deactivate"`) {
		t.Fatalf("the account page offers no deactivate button:\n%s", page)
	}
	csrf := csrfOf(t, page)
	resp, body := do(t, c, "POST", acctURL+"/deactivate", bearer, url.Values{"csrf": {csrf}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("deactivate: %d\n%s", resp.StatusCode, body)
	}
	if got := noticeOf(follow(t, srv.URL, resp, bearer)); !strings.HasPrefix(got, "Account deactivated") {
		t.Fatalf("deactivate: the account page says %q, want 'Account deactivated…'", got)
	}
	if a, err := st.AccountByID(ctx, acctID); err != nil || a.Status != acme.StatusDeactivated {
		t.Fatalf("account after deactivate = %+v, %v; want deactivated", a, err)
	}
	if got, err := st.OrderByID(ctx, o.ID); err != nil || got.Status != acme.StatusInvalid {
		t.Fatalf("pending order after deactivate = %+v, %v; want invalid", got, err)
	}
	evs, _, err := st.AuditList(ctx, store.Page{})
	if err != nil || len(evs) == 0 || evs[0].Action != "account.deactivate" || evs[0].Subject != acctID || evs[0].Actor != "admin:token" {
		t.Fatalf("audit = %+v, %v; want account.deactivate of %s by admin:token first", evs, err, acctID)
	}
	resp, _ = do(t, c, "POST", acctURL+"/deactivate", bearer, url.Values{"csrf": {csrf}})
	if got := noticeOf(follow(t, srv.URL, resp, bearer)); !strings.HasPrefix(got, "Not deactivated") {
		t.Fatalf("second deactivate: the account page says %q, want 'Not deactivated…'", got)
	}
	if evs2, _, err := st.AuditList(ctx, store.Page{}); err != nil || len(evs2) != len(evs) {
		t.Fatalf("a deactivate with nothing to do was audited: %d events, want %d (%v)", len(evs2), len(evs), err)
	}
}

// TestOrderPageUpstreamOrders: a relay order's page lists the upstream
// orders placed for it, and a failed one's says where an upstream
// certificate Hallmark never stored may be; an order no relay saw has no
// such section.
func TestOrderPageUpstreamOrders(t *testing.T) {
	t.Parallel()
	srv, st := panel(t)
	ctx := context.Background()
	c := &http.Client{CheckRedirect: noRedirect}
	bearer := "Bearer " + token
	relayed, failed, plain := pendingOrder(t, st, "relayed", "relayed.example.com"),
		pendingOrder(t, st, "failed", "failed.example.com"), pendingOrder(t, st, "plain", "plain.example.com")
	for _, u := range []store.UpstreamOrder{
		{OrderID: relayed.ID, Backend: "corp", AccountURL: "https://up.example/acct/7", OrderURL: "https://up.example/order/relayed"},
		{OrderID: failed.ID, Backend: "corp", AccountURL: "https://up.example/acct/7", OrderURL: "https://up.example/order/failed"},
	} {
		if err := st.UpstreamOrderRecord(ctx, u, ""); err != nil {
			t.Fatal(err)
		}
	}
	// Its account deactivated: the order ends invalid, as one whose
	// account or authorization lapsed while it was with the relay does.
	if _, err := st.AccountDeactivate(ctx, failed.AccountID); err != nil {
		t.Fatal(err)
	}
	if o, err := st.OrderByID(ctx, failed.ID); err != nil || o.Status != acme.StatusInvalid {
		t.Fatalf("the order of a deactivated account: %+v, %v; want invalid", o, err)
	}
	const orphanNote = "revoke it with the upstream account"
	for _, tc := range []struct {
		name   string
		order  *store.Order
		want   []string
		absent []string
	}{
		{"relayed", relayed, []string{"Upstream orders", "https://up.example/order/relayed", "https://up.example/acct/7"}, []string{orphanNote}},
		{"failed after placing", failed, []string{"Upstream orders", "https://up.example/order/failed", orphanNote}, nil},
		{"never relayed", plain, nil, []string{"Upstream orders"}},
	} {
		resp, page := do(t, c, "GET", srv.URL+"/orders/"+tc.order.ID, bearer, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d\n%s", tc.name, resp.StatusCode, page)
		}
		for _, w := range tc.want {
			if !strings.Contains(page, w) {
				t.Errorf("%s: the order page lacks %q", tc.name, w)
			}
		}
		for _, a := range tc.absent {
			if strings.Contains(page, a) {
				t.Errorf("%s: the order page shows %q", tc.name, a)
			}
		}
	}
}

// TestBlockedKeysPage: the panel lists the keys reported compromised, the
// certificate whose revocation reported each linked, and says so when
// there are none.
func TestBlockedKeysPage(t *testing.T) {
	t.Parallel()
	srv, st := panel(t)
	c := &http.Client{CheckRedirect: noRedirect}
	bearer := "Bearer " + token
	if _, page := do(t, c, "GET", srv.URL+"/keys", bearer, nil); !strings.Contains(page, "no key has been reported compromised") {
		t.Fatalf("the empty page does not say no key is blocked:\n%s", page)
	}
	key := store.KeyHash([]byte("a key reported by a subscriber"))
	if _, err := st.KeyBlock(context.Background(), store.BlockedKey{SPKIHash: key, Serial: "c0ffee", Why: "mail from the subscriber", Actor: "cli:alice"}); err != nil {
		t.Fatal(err)
	}
	resp, page := do(t, c, "GET", srv.URL+"/keys", bearer, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /keys: %d\n%s", resp.StatusCode, page)
	}
	for _, want := range []string{(store.BlockedKey{SPKIHash: key}).Hex(), `href="/certs/c0ffee"`, "cli:alice", "mail from the subscriber"} {
		if !strings.Contains(page, want) {
			t.Errorf("the blocked keys page lacks %q", want)
		}
	}
}
