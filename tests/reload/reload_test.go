package reload

import (
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/tests/harness"
)

// TestReloadSwitchesProfileAndCertificate: a profile's validity and the
// frontend's TLS certificate change, both processes get SIGHUP, and the
// next order's certificate has the new validity and the next handshake
// presents the new certificate, while clients asking throughout (a
// handshake per request, kept-alive connections, an ACME client ordering)
// see no request fail.
func TestReloadSwitchesProfileAndCertificate(t *testing.T) {
	for _, d := range harness.Dialects {
		t.Run(d.Name, func(t *testing.T) {
			ca := startCA(t, d.URL(t))
			wantValidity(t, order(t, ca, "before."+d.Name+".test"), 100)
			oldTLS := presented(t, ca)

			ca.Run("hallmark-worker", "--config", ca.Config, "ca", "init", "--tls-cert", "frontend2.pem", "--tls-key", "frontend2.key")
			newTLS := harness.ReadCert(t, ca.Dir+"/frontend2.pem")
			if newTLS.SerialNumber.Cmp(oldTLS.SerialNumber) == 0 {
				t.Fatal("the new TLS certificate is the old one")
			}
			edit(t, ca, replace("validity_hours = 100", "validity_hours = 200"))
			edit(t, ca, replace(`tls_cert = "frontend.pem"`+"\n"+`tls_key = "frontend.key"`, `tls_cert = "frontend2.pem"`+"\n"+`tls_key = "frontend2.key"`))

			tr := startTraffic(t, ca, 4)
			var during error
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // an ACME client ordering across the reload
				defer wg.Done()
				_, during = lego(t, ca, "during."+d.Name+".test")
			}()
			time.Sleep(300 * time.Millisecond)
			hangup(t, ca)
			time.Sleep(300 * time.Millisecond)
			wg.Wait()
			tr.end(t)
			if during != nil {
				t.Fatalf("an order across the reload failed: %v", during)
			}
			for _, p := range []string{"frontend", "worker"} {
				if a, r := outcomes(ca, p); a != 1 || r != 0 {
					t.Fatalf("%s: %d reloads applied, %d refused; want 1 applied\n%s", p, a, r, harness.Tail(ca.Log(p), 3000))
				}
			}
			if got := presented(t, ca); got.SerialNumber.Cmp(newTLS.SerialNumber) != 0 {
				t.Fatalf("the handshake after the reload presents %x, want the new certificate %x", got.SerialNumber, newTLS.SerialNumber)
			}
			wantValidity(t, order(t, ca, "after."+d.Name+".test"), 200)
			audit, _ := hallmark(t, ca, "audit", "list", "--kind", "config.reload", "--json")
			if strings.Count(audit, `"detail": "applied"`) != 2 || strings.Count(audit, `"subject": "sighup"`) != 2 {
				t.Fatalf("the audit log has not both processes' applied reloads:\n%s", audit)
			}
		})
	}
}

// TestReloadRefusesBrokenConfiguration: a file that does not parse, one
// with a bad value, and one that changes a profile's validity and the TLS
// certificate but names key files that do not exist are each refused
// whole by both processes, audited with the reason; the old
// configuration keeps serving, as an order and a handshake after them
// show.
func TestReloadRefusesBrokenConfiguration(t *testing.T) {
	for _, d := range harness.Dialects {
		t.Run(d.Name, func(t *testing.T) {
			ca := startCA(t, d.URL(t))
			oldTLS := presented(t, ca)
			broken := []struct {
				name, reason string
				edit         func(string) string
			}{
				{"bad TOML", "reading config", func(s string) string { return s + "\n[profiles.default\n" }},
				{"a bad value", "validity_hours", replace("validity_hours = 100", "validity_hours = -5")},
				{"missing key files", "missing.key", func(s string) string {
					s = replace("validity_hours = 100", "validity_hours = 300")(s)
					s = replace(`tls_key = "frontend.key"`, `tls_key = "missing.key"`)(s)
					return replace(`dir = "ca"`, `dir = "ca-missing"`)(s)
				}},
			}
			good, err := os.ReadFile(ca.Config)
			if err != nil {
				t.Fatal(err)
			}
			tr := startTraffic(t, ca, 2)
			for i, b := range broken {
				edit(t, ca, b.edit)
				hangup(t, ca)
				for _, p := range []string{"frontend", "worker"} {
					if a, r := outcomes(ca, p); a != 0 || r != i+1 {
						t.Fatalf("%s, %s: %d applied, %d refused; want %d refused\n%s", b.name, p, a, r, i+1, harness.Tail(ca.Log(p), 3000))
					}
				}
				if err := os.WriteFile(ca.Config, good, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			tr.end(t)
			frontendLog := ca.Log("frontend")
			if !strings.Contains(frontendLog, "missing.key") || !strings.Contains(ca.Log("worker"), "ca-missing") {
				t.Fatalf("the refusals do not name the missing files:\n%s\n%s", harness.Tail(frontendLog, 2000), harness.Tail(ca.Log("worker"), 2000))
			}
			audit, _ := hallmark(t, ca, "audit", "list", "--kind", "config.reload", "--json")
			var evs []struct{ Actor, Detail string }
			if err := json.Unmarshal([]byte(audit), &evs); err != nil {
				t.Fatalf("audit list --json: %v\n%s", err, audit)
			}
			if len(evs) != 2*len(broken) {
				t.Fatalf("%d reload events audited, want %d:\n%s", len(evs), 2*len(broken), audit)
			}
			for _, e := range evs {
				if !strings.HasPrefix(e.Detail, "refused: ") {
					t.Fatalf("an audited outcome is not a refusal: %+v", e)
				}
			}
			if got := presented(t, ca); got.SerialNumber.Cmp(oldTLS.SerialNumber) != 0 {
				t.Fatalf("after the refusals the handshake presents %x, want the old certificate %x", got.SerialNumber, oldTLS.SerialNumber)
			}
			wantValidity(t, order(t, ca, "after-refusals."+d.Name+".test"), 100)
		})
	}
}

// TestHallmarkReload: `hallmark reload` reaches both processes through
// the database and prints each one's outcome; a change only a restart
// applies (server.max_concurrent_requests) is refused by the frontend,
// which names the key, and the CLI exits 4.
func TestHallmarkReload(t *testing.T) {
	for _, d := range harness.Dialects {
		t.Run(d.Name, func(t *testing.T) {
			ca := startCA(t, d.URL(t))
			edit(t, ca, replace("validity_hours = 100", "validity_hours = 150"))
			out, code := hallmark(t, ca, "reload", "--expect", "2", "--wait", "30s", "--json")
			var rows []struct{ Process, Outcome string }
			if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil {
				t.Fatalf("hallmark reload: exit %d, %v\n%s", code, err, out)
			}
			if len(rows) != 2 || rows[0].Outcome != "applied" || rows[1].Outcome != "applied" ||
				!strings.HasPrefix(rows[0].Process, "frontend:") || !strings.HasPrefix(rows[1].Process, "worker:") {
				t.Fatalf("hallmark reload answers %+v, want the frontend and the worker applied", rows)
			}
			wantValidity(t, order(t, ca, "cli."+d.Name+".test"), 150)

			edit(t, ca, func(s string) string {
				return strings.Replace(s, "[server]\n", "[server]\nmax_concurrent_requests = 7\n", 1)
			})
			out, code = hallmark(t, ca, "reload", "--expect", "2", "--wait", "30s")
			if code != 4 || !strings.Contains(out, "server.max_concurrent_requests") || !strings.Contains(out, "restart") {
				t.Fatalf("a reload needing a restart: exit %d, want 4 naming server.max_concurrent_requests\n%s", code, out)
			}
			if !strings.Contains(out, "applied") {
				t.Fatalf("the worker, which does not use the key, should have applied:\n%s", out)
			}
		})
	}
}
