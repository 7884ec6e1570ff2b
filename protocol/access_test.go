package protocol_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/tests/testproc"

	"github.com/hallmark-ca/hallmark/protocol"
	"github.com/hallmark-ca/hallmark/protocol/access"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// withPolicy runs f against both stores with the access policy cfg, the
// server's log kept in logs.
func withPolicy(t *testing.T, cfg access.Config, logs io.Writer, f func(t *testing.T, e *env)) {
	t.Helper()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f(t, policyEnv(t, kind, cfg, logs))
		})
	}
}

// policyEnv is a frontend on a fresh store of kind with the access policy cfg.
func policyEnv(t *testing.T, kind string, cfg access.Config, logs io.Writer) *env {
	t.Helper()
	pol, err := access.New(cfg, access.Options{})
	if err != nil {
		t.Fatal(err)
	}
	url := testdb.SQLite(t)
	if kind == "postgres" {
		url = testdb.Postgres(t)
	}
	return newEnvVia(t, kind, url, url, nil, nil, logs, func(o *protocol.Options) { o.Access = pol })
}

// via is a client whose connections come from the loopback address src,
// sending forwarded (when set) as X-Forwarded-For: a proxy, or a client
// elsewhere on the network.
type via struct {
	hc        *http.Client
	forwarded string
}

func from(src, forwarded string) via {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	return via{hc: &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}, forwarded: forwarded}
}

func (v via) post(t *testing.T, e *env, a *account, url string, payload any) *response {
	t.Helper()
	raw, _ := json.Marshal(payload)
	if payload == nil {
		raw = nil
	}
	return v.postRaw(t, url, e.sign(t, a, url, raw, signOpts{}))
}

func (v via) postRaw(t *testing.T, url string, body []byte) *response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/jose+json")
	if v.forwarded != "" {
		req.Header.Set("X-Forwarded-For", v.forwarded)
	}
	res, err := v.hc.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return &response{status: res.StatusCode, header: res.Header, body: b}
}

func (v via) register(t *testing.T, e *env) (*account, *response) {
	t.Helper()
	a := newKey(t)
	r := v.post(t, e, a, e.base+"/acme/new-account", map[string]any{"termsOfServiceAgreed": true})
	a.kid = r.header.Get("Location")
	return a, r
}

func wantRefusal(t *testing.T, r *response, status int, typ acme.ProblemType, detail string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if p := r.problem(t); p.Type != typ || p.Detail != detail {
		t.Fatalf("problem %s %q, want %s %q", p.Type, p.Detail, typ, detail)
	}
}

// labPolicy: the lab (127.0.0.1) may ask, through the trusted proxy
// 127.0.0.2 too, for names under lab.example.
func labPolicy() access.Config {
	return access.Config{
		TrustedProxies: []string{"127.0.0.2/32"},
		Checks: map[string]access.Check{
			"lab":   {Kind: "cidr", Ranges: []string{"127.0.0.1/32"}},
			"names": {Kind: "identifiers", Allow: []string{"*.lab.example"}},
		},
		Rules: []access.Rule{
			{Name: "outside", When: "not lab", Action: "deny", Message: "this CA serves the lab network only"},
			{Name: "foreign-names", When: "not names", Action: "deny", Problem: "rejectedIdentifier", Message: "lab.example names only"},
		},
	}
}

// TestAccessPolicy: a client in the lab registers and orders lab names; an
// order for another name is refused rejectedIdentifier and creates
// nothing; a client elsewhere is refused unauthorized on its first POST,
// before its body is even read; a trusted proxy's X-Forwarded-For names
// the client, an untrusted one's is ignored.
func TestAccessPolicy(t *testing.T) {
	t.Parallel()
	withPolicy(t, labPolicy(), nil, func(t *testing.T, e *env) {
		lab := from("127.0.0.1", "")
		a, r := lab.register(t, e)
		wantStatus(t, r, http.StatusCreated)
		r = lab.post(t, e, a, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs("www.lab.example")})
		wantStatus(t, r, http.StatusCreated)
		r = lab.post(t, e, a, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs("www.lab.example", "www.other.example")})
		wantRefusal(t, r, http.StatusBadRequest, acme.ProblemRejectedIdentifier, "lab.example names only")
		if n := e.count(t, "SELECT count(*) FROM orders WHERE account_id = $1", lastSegment(a.kid)); n != 1 {
			t.Errorf("%d orders, want the 1 allowed", n)
		}

		outside := from("127.0.0.3", "")
		_, r = outside.register(t, e)
		wantRefusal(t, r, http.StatusForbidden, acme.ProblemUnauthorized, "this CA serves the lab network only")
		// The lab's account, used from elsewhere: refused too.
		r = outside.post(t, e, a, a.kid, nil)
		wantRefusal(t, r, http.StatusForbidden, acme.ProblemUnauthorized, "this CA serves the lab network only")
		// Decided before any work: a body that is no JWS at all.
		r = outside.postRaw(t, e.base+"/acme/new-account", []byte("not a JWS"))
		wantRefusal(t, r, http.StatusForbidden, acme.ProblemUnauthorized, "this CA serves the lab network only")

		_, r = from("127.0.0.2", "127.0.0.1").register(t, e)
		wantStatus(t, r, http.StatusCreated)
		_, r = from("127.0.0.2", "127.0.0.3").register(t, e)
		wantRefusal(t, r, http.StatusForbidden, acme.ProblemUnauthorized, "this CA serves the lab network only")
		_, r = from("127.0.0.3", "127.0.0.1").register(t, e)
		wantRefusal(t, r, http.StatusForbidden, acme.ProblemUnauthorized, "this CA serves the lab network only")
	})
}

// TestAccessPolicyWarn: in mode warn nothing is refused, and the log names
// the rule that would have refused it.
func TestAccessPolicyWarn(t *testing.T) {
	t.Parallel()
	cfg := labPolicy()
	cfg.Mode = "warn"
	var logs testproc.Buffer
	withPolicy(t, cfg, &logs, func(t *testing.T, e *env) {
		outside := from("127.0.0.3", "")
		a, r := outside.register(t, e)
		wantStatus(t, r, http.StatusCreated)
		r = outside.post(t, e, a, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs("www.other.example")})
		wantStatus(t, r, http.StatusCreated)
		if !strings.Contains(logs.String(), `"access policy would refuse this request (mode warn: allowed)" rule=outside verdict=deny route=new_account client=127.0.0.3`) {
			t.Errorf("the log does not name the rule:\n%s", logs.String())
		}
	})
}

// TestAccessPolicyEAB: an eab check reads the account's binding: a bound
// account of a team orders, an unbound one is refused; a newAccount, which
// no account signs yet, is not held to it.
func TestAccessPolicyEAB(t *testing.T) {
	t.Parallel()
	cfg := access.Config{
		Checks: map[string]access.Check{"team": {Kind: "eab", KeyLabels: []string{"team *"}}},
		Rules:  []access.Rule{{When: "not team", Action: "deny", Message: "bind your account with a team key"}},
	}
	withPolicy(t, cfg, nil, func(t *testing.T, e *env) {
		lab := from("127.0.0.1", "")
		bound := e.registerBound(t, "kid-team-a")
		r := lab.post(t, e, bound, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs("www.team-a.example")})
		wantStatus(t, r, http.StatusCreated)
		unbound, r := lab.register(t, e)
		wantStatus(t, r, http.StatusCreated)
		r = lab.post(t, e, unbound, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs("www.team-a.example")})
		wantRefusal(t, r, http.StatusForbidden, acme.ProblemUnauthorized, "bind your account with a team key")
	})
}

// TestAccessPolicyUnknown: a hook that runs past its time budget cannot
// answer: the request is answered 503 serverInternal with Retry-After,
// neither refused nor let through, and no order is created.
func TestAccessPolicyUnknown(t *testing.T) {
	t.Parallel()
	hook := filepath.Join(t.TempDir(), "slow.sh")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\nsleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := access.Config{
		Checks: map[string]access.Check{"cmdb": {Kind: "hook", Command: []string{hook}, TimeoutMS: 300}},
		Rules:  []access.Rule{{When: "not cmdb", Action: "deny", Message: "not in the CMDB"}},
	}
	withPolicy(t, cfg, nil, func(t *testing.T, e *env) {
		lab := from("127.0.0.1", "")
		a, r := lab.register(t, e) // the hook looks at orders only
		wantStatus(t, r, http.StatusCreated)
		r = lab.post(t, e, a, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs("www.lab.example")})
		wantStatus(t, r, http.StatusServiceUnavailable)
		if p := r.problem(t); p.Type != acme.ProblemServerInternal || !strings.Contains(p.Detail, "could not complete its access checks") {
			t.Errorf("problem %+v", p)
		}
		if got := r.header.Get("Retry-After"); got != "2" {
			t.Errorf("Retry-After %q, want 2 (server.retry_after_seconds)", got)
		}
		if n := e.count(t, "SELECT count(*) FROM orders"); n != 0 {
			t.Errorf("%d orders created, want none", n)
		}
	})
}

// TestAccessPolicyBeforeFold: a challenge POST from an account whose key
// the frontend knows is claimed in one transaction with its nonce
// (claimnow.go); the account's stage of the policy still runs first. A hook on the account allows the order, then is made to deny:
// the challenge POST is refused and the challenge is left pending.
func TestAccessPolicyBeforeFold(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			answer, hook := filepath.Join(dir, "answer"), filepath.Join(dir, "hook.sh")
			set := func(v string) {
				if err := os.WriteFile(answer, []byte(`{"answer":"`+v+`"}`), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			set("allow")
			if err := os.WriteFile(hook, []byte("#!/bin/sh\nexec /bin/cat "+answer+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			e := policyEnv(t, kind, access.Config{
				Checks: map[string]access.Check{"inventory": {Kind: "hook", Command: []string{hook}, On: "account"}},
				Rules:  []access.Rule{{When: "not inventory", Action: "deny", Message: "retired from the inventory"}},
			}, nil)
			a := e.register(t)
			o, _ := e.newOrder(t, a, dnsIDs("www.lab.example"))
			ch := e.authz(t, a, o.Authorizations[0]).Challenges[0]
			set("deny")
			r := e.post(t, a, ch.URL, map[string]any{})
			wantRefusal(t, r, http.StatusForbidden, acme.ProblemUnauthorized, "retired from the inventory")
			set("allow")
			if got := e.authz(t, a, o.Authorizations[0]); got.Status != acme.StatusPending || got.Challenges[0].Status != acme.StatusPending {
				t.Errorf("after the refusal the authorization is %s and its challenge %s, want both pending", got.Status, got.Challenges[0].Status)
			}
		})
	}
}
