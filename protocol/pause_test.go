package protocol_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/protocol"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// failValidation orders name for a and fails its validation as the
// worker would.
func (e *env) failValidation(t *testing.T, a *account, name string) {
	t.Helper()
	o, _ := e.newOrder(t, a, dnsIDs(name))
	az := e.authz(t, a, o.Authorizations[0])
	ch := az.Challenges[0]
	wantStatus(t, e.post(t, a, ch.URL, map[string]any{}), http.StatusOK)
	if err := e.st.ChallengeVerdict(context.Background(), store.Verdict{ChallengeID: lastSegment(ch.URL), Status: acme.StatusInvalid,
		Error: &acme.Problem{Type: acme.ProblemConnection, Detail: "could not connect"}}); err != nil {
		t.Fatalf("ChallengeVerdict: %v", err)
	}
}

// ageRuns moves every run of failures days back, as days passing on the
// database clock would.
func (e *env) ageRuns(t *testing.T, days int) {
	t.Helper()
	if e.kind == "postgres" {
		e.exec(t, "UPDATE validation_streaks SET first_failed_at = first_failed_at - $1::int * interval '1 day'", days)
		return
	}
	e.exec(t, "UPDATE validation_streaks SET first_failed_at = first_failed_at - $1 * 86400000000", days)
}

var unpauseLink = regexp.MustCompile(`https?://\S+/unpause\?jwt=\S+`)

// TestPausedAccount: an account whose validations of a name failed for
// the configured days is refused newOrder (folded or not) and newAuthz
// for it with rateLimited and a link; the link's page names the name, a
// forged link does nothing, and its POST unpauses (audited), after which
// the order is admitted. Another name, and another account, are not
// affected.
func TestPausedAccount(t *testing.T) {
	withStores(t, func(c *protocol.Config) {
		days := 2
		c.Limits.PauseAfterDays, c.Limits.PauseMinFailures = &days, 3
		def := c.Profiles["default"]
		def.AllowPreAuthorization = true
		c.Profiles["default"] = def
	}, func(t *testing.T, e *env) {
		a, b := e.register(t), e.register(t)
		for range 3 {
			e.failValidation(t, a, "zombie.example.com")
		}
		e.failValidation(t, b, "zombie.example.com")
		e.newOrder(t, a, dnsIDs("zombie.example.com")) // failing, but not for 2 days yet
		e.ageRuns(t, 3)

		var link string
		for i := range 2 { // on PostgreSQL the second is tried folded first
			r := e.post(t, a, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs("ok.example.com", "*.zombie.example.com")})
			p := wantProblem(t, e, r, acme.ProblemRateLimited, http.StatusTooManyRequests)
			if p.Identifier == nil || p.Identifier.Value != "zombie.example.com" || !strings.Contains(p.Detail, "zombie.example.com") {
				t.Errorf("refusal %d names %+v: %s", i, p.Identifier, p.Detail)
			}
			if link = unpauseLink.FindString(p.Detail); link == "" {
				t.Fatalf("refusal %d has no unpause link: %s", i, p.Detail)
			}
		}
		r := e.post(t, a, e.base+"/acme/new-authz", map[string]any{"identifier": acme.Identifier{Type: acme.IdentifierDNS, Value: "zombie.example.com"}})
		wantProblem(t, e, r, acme.ProblemRateLimited, http.StatusTooManyRequests)
		e.newOrder(t, a, dnsIDs("ok.example.com"))
		e.newOrder(t, b, dnsIDs("zombie.example.com"))

		page := func(method, u string, form url.Values) (int, string) {
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
			resp, err := e.hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
				t.Errorf("%s %s: Content-Type %q", method, u, ct)
			}
			return resp.StatusCode, string(b)
		}
		tok := strings.TrimPrefix(link[strings.Index(link, "jwt="):], "jwt=")
		tok, _ = url.QueryUnescape(tok)
		forged := tok[:len(tok)-4] + "AAAA"
		if st, body := page(http.MethodPost, e.base+"/unpause", url.Values{"jwt": {forged}}); st != http.StatusBadRequest || !strings.Contains(body, "expired") {
			t.Errorf("a forged link: %d %s", st, body)
		}
		// Hostile input: a huge token, none, a malformed one, a huge form.
		for _, u := range []string{e.base + "/unpause?jwt=" + strings.Repeat("A", 10000), e.base + "/unpause", e.base + "/unpause?jwt=a.b.c"} {
			if st, _ := page(http.MethodGet, u, nil); st != http.StatusBadRequest {
				t.Errorf("GET %.60s: %d, want 400", u, st)
			}
		}
		if st, _ := page(http.MethodPost, e.base+"/unpause", url.Values{"jwt": {strings.Repeat("A", 20000)}}); st != http.StatusBadRequest {
			t.Errorf("a 20 KiB form: %d, want 400", st)
		}
		st, body := page(http.MethodGet, link, nil)
		if st != http.StatusOK || !strings.Contains(body, "dns:zombie.example.com") || !strings.Contains(body, `id="unpause"`) {
			t.Fatalf("the unpause page: %d %s", st, body)
		}
		wantProblem(t, e, e.post(t, a, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs("zombie.example.com")}),
			acme.ProblemRateLimited, http.StatusTooManyRequests) // a GET unpauses nothing
		if st, body := page(http.MethodPost, e.base+"/unpause", url.Values{"jwt": {tok}}); st != http.StatusOK || !strings.Contains(body, "Unpaused") {
			t.Fatalf("unpausing: %d %s", st, body)
		}
		e.newOrder(t, a, dnsIDs("zombie.example.com"))
		if n := e.count(t, "SELECT count(*) FROM audit_events WHERE action = $1 AND subject = $2 AND actor = $3",
			store.ActionPauseLifted, lastSegment(a.kid), "acme:"+lastSegment(a.kid)); n != 1 {
			t.Errorf("%d audit events of the unpause, want 1", n)
		}
	})
}
