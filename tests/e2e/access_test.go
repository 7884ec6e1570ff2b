package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/acme"

	"github.com/hallmark-ca/hallmark/tests/harness"
	"github.com/hallmark-ca/hallmark/tests/testdns"
)

// labDNS is the lab's reverse DNS: 127.0.0.1 is ws1.lab.test, confirmed;
// 127.0.0.4 claims spoof.lab.test, which resolves elsewhere (forward
// confirmation refuses it); 127.0.0.5 is host5.elsewhere.test, confirmed but
// outside the allowed names; 127.0.0.6's PTR lookup fails (SERVFAIL).
func labDNS(t *testing.T) *testdns.Server {
	dns := testdns.Start(t)
	dns.SetPTR("127.0.0.1", "ws1.lab.test")
	dns.SetAddrs("ws1.lab.test", "127.0.0.1")
	dns.SetPTR("127.0.0.4", "spoof.lab.test")
	dns.SetAddrs("spoof.lab.test", "127.0.0.9")
	dns.SetPTR("127.0.0.5", "host5.elsewhere.test")
	dns.SetAddrs("host5.elsewhere.test", "127.0.0.5")
	dns.ServFail("6.0.0.127.in-addr.arpa")
	return dns
}

const (
	msgOutside = "this CA serves the lab network only"
	msgPTR     = "your address has no lab.test host name"
	msgNames   = "only e2e-access.test names"
)

// labPolicy is [access] for a lab behind the trusted proxy 127.0.0.2:
// clients in the lab's addresses, with a forward-confirmed lab.test host
// name, may order e2e-access.test names.
func labPolicy(resolver, mode string) string {
	return fmt.Sprintf(`
[access]
mode = %q
trusted_proxies = ["127.0.0.2/32"]
resolvers = [%q]

[access.checks.lab]
kind = "cidr"
ranges = ["127.0.0.1/32", "127.0.0.4/32", "127.0.0.5/32", "127.0.0.6/32"]

[access.checks.ptr]
kind = "rdns"
allow = ["*.lab.test"]
timeout_ms = 2000

[access.checks.names]
kind = "identifiers"
allow = ["*.e2e-access.test"]

[[access.rules]]
name = "outside"
when = "not lab"
action = "deny"
message = %q

[[access.rules]]
name = "no-host-name"
when = "not ptr"
action = "deny"
message = %q

[[access.rules]]
name = "foreign-names"
when = "not names"
action = "deny"
problem = "rejectedIdentifier"
message = %q
`, mode, resolver, msgOutside, msgPTR, msgNames)
}

// TestAccessPolicyClients: lego and certbot, through a reverse proxy that
// varies what the real frontend sees. From the lab through the trusted
// proxy a client gets a certificate; through an untrusted proxy its
// X-Forwarded-For is ignored and it is refused with the rule's problem; a
// client whose PTR name fails forward confirmation, or lies outside the
// allowed names, is refused too. `hallmark policy explain` agrees with the
// server on each request of a table.
func TestAccessPolicyClients(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.Name, func(t *testing.T) {
			requireTool(t, "lego", "apt-get install lego")
			ca, p := startBehindProxy(t, d.URL(t), labPolicy(labDNS(t).Addr, "enforce"))
			t.Run("explain agrees with the server", func(t *testing.T) { explainAgrees(t, ca, p) })

			for _, c := range []struct {
				name string
				via  hop
				want string // "" for a certificate, else the problem's detail
			}{
				{"trusted proxy", trustedProxy, ""},
				{"untrusted proxy", untrustedProxy, "urn:ietf:params:acme:error:unauthorized :: " + msgOutside},
				{"PTR not forward-confirmed", direct("127.0.0.4"), "urn:ietf:params:acme:error:unauthorized :: " + msgPTR},
				{"PTR outside the allowed names", direct("127.0.0.5"), "urn:ietf:params:acme:error:unauthorized :: " + msgPTR},
			} {
				t.Run("lego/"+c.name, func(t *testing.T) {
					p.via(c.via)
					out, err := legoVia(t, ca, p, "www.e2e-access.test")
					if c.want == "" {
						if err != nil {
							t.Fatalf("lego: %v\n%s", err, out)
						}
						return
					}
					if err == nil || !strings.Contains(out, c.want) {
						t.Fatalf("lego: %v, want a refusal with %q:\n%s", err, c.want, out)
					}
				})
			}
			t.Run("the trail names the forwarded client and its PTR name", func(t *testing.T) {
				var events []struct {
					Action     string
					ClientAddr string `json:"client_addr"`
					PTR        string
				}
				if err := json.Unmarshal([]byte(ca.Run("hallmark", "--config", ca.Config, "audit", "list", "--kind", "certificate.issued", "--json")), &events); err != nil {
					t.Fatal(err)
				}
				if len(events) != 1 || events[0].ClientAddr != "127.0.0.1" || events[0].PTR != "ws1.lab.test" {
					t.Errorf("certificate.issued events %+v, want one from 127.0.0.1 (ws1.lab.test), not the proxy", events)
				}
			})
			requireTool(t, "certbot", "apt-get install certbot")
			t.Run("certbot/trusted proxy", func(t *testing.T) {
				p.via(trustedProxy)
				if out, err := certbotVia(t, ca, p, "cb.e2e-access.test"); err != nil {
					t.Fatalf("certbot: %v\n%s", err, out)
				}
			})
			t.Run("certbot/untrusted proxy", func(t *testing.T) {
				p.via(untrustedProxy)
				out, err := certbotVia(t, ca, p, "cb2.e2e-access.test")
				if err == nil || !strings.Contains(out, msgOutside) {
					t.Fatalf("certbot: %v, want a refusal with %q:\n%s", err, msgOutside, out)
				}
			})
		})
	}
}

// legoVia runs lego for name against the CA through the proxy, with an
// account directory of its own; it returns lego's output.
func legoVia(t *testing.T, ca *CA, p *proxy, name string) (string, error) {
	t.Helper()
	path := t.TempDir()
	l := harness.Lego{Bin: requireTool(t, "lego", "apt-get install lego"), Directory: p.URL + "/directory", Root: ca.Root, Email: "e2e@hallmark.test", Path: path}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, err := l.Run(ctx, "--domains", name, "--http", "--http.port", fmt.Sprintf("127.0.0.1:%d", ca.HTTPPort), "run")
	if err == nil {
		cert := readCert(t, filepath.Join(path, "certificates", name+".crt"))
		if len(cert.DNSNames) != 1 || cert.DNSNames[0] != name {
			t.Errorf("certificate for %v, want %s", cert.DNSNames, name)
		}
	}
	return out, err
}

// certbotVia runs certbot certonly for name through the proxy, standalone
// on the CA's http-01 port; it returns certbot's output and the end of its
// log, where the problem's detail is.
func certbotVia(t *testing.T, ca *CA, p *proxy, name string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, requireTool(t, "certbot", "apt-get install certbot"), "certonly", "-n",
		"--server", p.URL+"/directory", "--agree-tos", "--register-unsafely-without-email",
		"--config-dir", filepath.Join(dir, "config"), "--work-dir", filepath.Join(dir, "work"), "--logs-dir", filepath.Join(dir, "logs"),
		"--standalone", "--preferred-challenges", "http", "--http-01-port", fmt.Sprint(ca.HTTPPort), "--http-01-address", "127.0.0.1",
		"-d", name)
	cmd.Env = append(cmd.Environ(), "REQUESTS_CA_BUNDLE="+ca.Root)
	out, err := cmd.CombinedOutput()
	if err == nil {
		readCert(t, filepath.Join(dir, "config", "live", name, "cert.pem"))
	}
	return string(out), err
}

// explainRow is one request, sent to the server and given to explain.
type explainRow struct {
	name string
	via  hop
	id   string
	want string // verdict and, for deny, problem and message: as outcome writes it
}

// explainAgrees sends each row's newOrder through the proxy with an ACME
// client (golang.org/x/crypto/acme) and asks `hallmark policy explain`
// about the same client and identifier: both must come to the row's
// decision.
func explainAgrees(t *testing.T, ca *CA, p *proxy) {
	rows := []explainRow{
		{"lab through the trusted proxy", trustedProxy, "www.e2e-access.test", "allow"},
		{"a foreign name", trustedProxy, "www.other.test", "deny rejectedIdentifier " + msgNames},
		{"an untrusted proxy", untrustedProxy, "www.e2e-access.test", "deny unauthorized " + msgOutside},
		{"the trusted proxy for an outsider", hop{src: "127.0.0.2", xff: "127.0.0.3"}, "www.e2e-access.test", "deny unauthorized " + msgOutside},
		{"a PTR refused by forward confirmation", direct("127.0.0.4"), "www.e2e-access.test", "deny unauthorized " + msgPTR},
		{"a PTR outside the patterns", direct("127.0.0.5"), "www.e2e-access.test", "deny unauthorized " + msgPTR},
		{"DNS fails: unknown", direct("127.0.0.6"), "www.e2e-access.test", "unavailable"},
	}
	c := acmeClient(t, ca, p)
	p.via(trustedProxy)
	ctx := context.Background()
	if _, err := c.Register(ctx, &acme.Account{}, acme.AcceptTOS); err != nil {
		t.Fatalf("registering through the trusted proxy: %v", err)
	}
	for _, r := range rows {
		p.via(r.via)
		_, err := c.AuthorizeOrder(ctx, acme.DomainIDs(r.id))
		server := outcome(err)
		args := []string{"--config", ca.Config, "policy", "explain", "--client-addr", r.via.src, "--identifier", "dns:" + r.id}
		if r.via.xff != "" {
			args = append(args, "--forwarded-for", r.via.xff)
		}
		out := ca.Run("hallmark", args...)
		explained := decision(t, out)
		if server != r.want || explained != r.want {
			t.Errorf("%s: the server says %q, explain %q; want %q\n%s", r.name, server, explained, r.want, out)
		}
	}
}

// acmeClient is an ACME client through the proxy that never retries.
func acmeClient(t *testing.T, ca *CA, p *proxy) *acme.Client {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &acme.Client{Key: key, DirectoryURL: p.URL + "/directory", HTTPClient: ca.HTTPClient(),
		RetryBackoff: func(int, *http.Request, *http.Response) time.Duration { return -1 }}
}

// outcome is what the server answered a newOrder, as explain's decision
// reads: allow, deny with problem and message, or unavailable (503 with
// Retry-After).
func outcome(err error) string {
	var ae *acme.Error
	switch {
	case err == nil:
		return "allow"
	case errors.As(err, &ae) && ae.StatusCode == http.StatusServiceUnavailable && ae.Header.Get("Retry-After") != "":
		return "unavailable"
	case errors.As(err, &ae):
		return "deny " + strings.TrimPrefix(ae.ProblemType, "urn:ietf:params:acme:error:") + " " + ae.Detail
	}
	return "error: " + err.Error()
}

var decisionLine = regexp.MustCompile(`(?m)^decision: (\w+) by "[^"]*"(?:: (\w+) "([^"]*)")?`)

// decision is explain's decision line as outcome writes an answer.
func decision(t *testing.T, out string) string {
	t.Helper()
	m := decisionLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("explain printed no decision:\n%s", out)
	}
	if m[1] == "deny" {
		return "deny " + m[2] + " " + m[3]
	}
	return m[1]
}

// TestAccessPolicyWarn: in mode warn, a client the policy would refuse gets
// its certificate, and the frontend's log names the rule that would have
// refused it.
func TestAccessPolicyWarn(t *testing.T) {
	requireTool(t, "lego", "apt-get install lego")
	ca, p := startBehindProxy(t, dialects[0].URL(t), labPolicy(labDNS(t).Addr, "warn"))
	p.via(untrustedProxy)
	if out, err := legoVia(t, ca, p, "warn.e2e-access.test"); err != nil {
		t.Fatalf("lego in mode warn: %v\n%s", err, out)
	}
	log := ca.Log("frontend")
	for _, want := range []string{
		`msg="access policy in mode warn: requests it would refuse are logged and allowed"`,
		`msg="access policy would refuse this request (mode warn: allowed)" process=frontend rule=outside verdict=deny route=new_account client=127.0.0.3 peer=127.0.0.3`,
		`rule=outside verdict=deny route=finalize client=127.0.0.3`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the frontend's log lacks %s:\n%s", want, log)
		}
	}
}

// TestAccessPolicyUnknown: an operator's hook that does not answer in time
// leaves the policy unable to decide: lego's newOrder is answered 503
// serverInternal with Retry-After, never refused and never let through,
// and nothing is issued.
func TestAccessPolicyUnknown(t *testing.T) {
	requireTool(t, "lego", "apt-get install lego")
	hook := filepath.Join(t.TempDir(), "cmdb.sh")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\nsleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ca, p := startBehindProxy(t, dialects[0].URL(t), fmt.Sprintf(`
[access.checks.cmdb]
kind = "hook"
command = [%q]
timeout_ms = 500

[[access.rules]]
when = "not cmdb"
action = "deny"
message = "not in the CMDB"
`, hook))
	out, err := legoVia(t, ca, p, "www.e2e-access.test")
	if err == nil || !strings.Contains(out, "503") || !strings.Contains(out, "could not complete its access checks for this request") {
		t.Fatalf("lego: %v, want the 503 of an undecided policy:\n%s", err, out)
	}
	if certs := ca.Run("hallmark", "--config", ca.Config, "certs", "list", "--json"); strings.TrimSpace(certs) != "[]" {
		t.Errorf("certificates issued: %s", certs)
	}
	if log := ca.Log("frontend"); !strings.Contains(log, `msg="acme request refused: the access policy could not decide"`) || !strings.Contains(log, "did not answer within 500ms") {
		t.Errorf("the frontend's log does not say why:\n%s", log)
	}
}
