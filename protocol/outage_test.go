package protocol_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// outageCall is one ACME request a client makes during an outage.
type outageCall struct {
	name string
	do   func(t *testing.T) *response
}

// outageCalls is a request to every kind of endpoint that needs the
// database, for a's order o (pending, at url) and certificate c.
func outageCalls(e *env, a *account, o orderJSON, url string, c issued) []outageCall {
	post := func(u string, payload any) func(t *testing.T) *response {
		return func(t *testing.T) *response { return e.post(t, a, u, payload) }
	}
	return []outageCall{
		{"newAccount", func(t *testing.T) *response {
			return e.post(t, newKey(t), e.base+"/acme/new-account", map[string]any{"termsOfServiceAgreed": true})
		}},
		{"newOrder", post(e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs("during.outage.example")})},
		{"account", post(a.kid, nil)},
		{"order", post(url, nil)},
		{"authz", post(o.Authorizations[0], nil)},
		{"finalize", post(o.Finalize, map[string]any{"csr": b64([]byte("x"))})},
		{"cert", post(c.certURL, nil)},
		{"crl", func(t *testing.T) *response { return e.get(t, http.MethodGet, "/crl/"+issuerID) }},
	}
}

// wantOutage asserts the answer every client gets while the database is
// away: 503 serverInternal, Retry-After as configured, and a detail that
// says to retry.
func wantOutage(t *testing.T, e *env, name string, r *response, detail string) {
	t.Helper()
	if r.status != http.StatusServiceUnavailable {
		t.Errorf("%s during the outage: status %d, want 503; body %s", name, r.status, r.body)
		return
	}
	if got := r.header.Get("Retry-After"); got != fmt.Sprint(e.cfg.Server.RetryAfterSeconds) {
		t.Errorf("%s during the outage: Retry-After %q, want %d", name, got, e.cfg.Server.RetryAfterSeconds)
	}
	if name == "crl" {
		return // a relying party's plain GET: no ACME headers
	}
	p := wantProblem(t, e, r, acme.ProblemServerInternal, http.StatusServiceUnavailable)
	if !strings.Contains(p.Detail, detail) {
		t.Errorf("%s during the outage: detail %q, want it to say %q", name, p.Detail, detail)
	}
}

// TestDatabaseOutagePostgres: the frontend's connections to PostgreSQL
// are cut (reset mid-use, new ones refused): every endpoint that needs the
// database answers 503 with Retry-After and says the database is
// unavailable, /readyz is 503, and the outage is logged once, not per
// request. newNonce still answers 200: it writes nothing, and its nonce is
// good once the database is back. Mended, /readyz is 200 and the request
// signed with that nonce succeeds.
func TestDatabaseOutagePostgres(t *testing.T) {
	t.Parallel()
	url := testdb.Postgres(t)
	link, via := testdb.Cuttable(t, url)
	var logs syncBuffer
	e := newEnvVia(t, "postgres", url, via, nil, nil, &logs)
	a := e.register(t)
	c := e.issue(t, a, "", "issued.outage.example")
	o, orderURL := e.newOrder(t, a, dnsIDs("pending.outage.example"))

	link.Cut()
	r := e.get(t, http.MethodHead, "/acme/new-nonce")
	kept := r.header.Get("Replay-Nonce")
	if r.status != http.StatusOK || kept == "" {
		t.Fatalf("newNonce during the outage: %d, nonce %q; want 200 with a nonce", r.status, kept)
	}
	for _, call := range outageCalls(e, a, o, orderURL, c) {
		wantOutage(t, e, call.name, call.do(t), "the CA's database is unavailable; retry after 2 seconds")
	}
	wantStatus(t, e.get(t, http.MethodGet, "/readyz"), http.StatusServiceUnavailable)
	if n := strings.Count(logs.String(), `msg="acme request refused: the database is unavailable"`); n != 1 {
		t.Errorf("the outage was logged %d times for %d refusals, want once:\n%s", n, len(outageCalls(e, a, o, orderURL, c)), logs.String())
	}

	link.Mend()
	wantReady(t, e)
	r = e.post(t, a, orderURL, nil, signOpts{nonce: kept})
	wantStatus(t, r, http.StatusOK)
}

// TestDatabaseOutageSQLite: another process holds SQLite's write lock past
// the request's deadline: every write answers 503 with Retry-After, and
// reads go on (WAL).
func TestDatabaseOutageSQLite(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "sqlite", func(c *protocol.Config) { c.Server.RequestTimeoutMS = 1500 }, nil, nil)
	a := e.register(t)
	o, orderURL := e.newOrder(t, a, dnsIDs("pending.outage.example"))

	holder, err := e.sqliteDB(t).BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// A write takes the lock: database/sql's BEGIN is deferred here.
	if _, err := holder.Exec(`UPDATE settings SET name = name WHERE 0`); err != nil {
		t.Fatal(err)
	}
	writes := []outageCall{
		{"newAccount", func(t *testing.T) *response {
			return e.post(t, newKey(t), e.base+"/acme/new-account", map[string]any{"termsOfServiceAgreed": true})
		}},
		{"newOrder", func(t *testing.T) *response {
			return e.post(t, a, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs("during.outage.example")})
		}},
		{"challenge", func(t *testing.T) *response {
			return e.post(t, a, e.authz(t, a, o.Authorizations[0]).Challenges[0].URL, map[string]any{})
		}},
	}
	for _, call := range writes {
		start := time.Now()
		wantOutage(t, e, call.name, call.do(t), "retry")
		t.Logf("%s refused after %s", call.name, time.Since(start).Round(time.Millisecond))
	}
	wantStatus(t, e.post(t, a, orderURL, nil), http.StatusOK)
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, e.post(t, a, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs("after.outage.example")}), http.StatusCreated)
}

// wantReady waits (5 s at most) for /readyz to answer 200.
func wantReady(t *testing.T, e *env) {
	t.Helper()
	var r *response
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if r = e.get(t, http.MethodGet, "/readyz"); r.status == http.StatusOK {
			return
		}
	}
	t.Fatalf("/readyz once the database is back: %d %s, want 200", r.status, r.body)
}
