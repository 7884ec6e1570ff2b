package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/tests/harness"
	"github.com/hallmark-ca/hallmark/tests/testdb"
	"github.com/hallmark-ca/hallmark/tests/testdns"
)

// perspective is one remote perspective: a hallmark-worker process started
// with worker.perspective, resolving through its own DNS server.
type perspective struct {
	name string
	dns  *testdns.Server
	proc *harness.Proc
}

// startPerspective starts a perspective worker of ca named name, its
// configuration ca's but for its name, its resolver and its health port.
func startPerspective(t *testing.T, ca *CA, name string) *perspective {
	t.Helper()
	p := &perspective{name: name, dns: testdns.Start(t)}
	b, err := os.ReadFile(ca.Config)
	if err != nil {
		t.Fatal(err)
	}
	conf := regexp.MustCompile(`(?m)^resolvers = .*$`).ReplaceAllString(string(b), fmt.Sprintf("resolvers = [%q]", p.dns.Addr))
	conf = regexp.MustCompile(`(?m)^health_listen = .*$`).ReplaceAllString(conf,
		fmt.Sprintf("health_listen = \"127.0.0.1:%d\"\nperspective = %q", harness.FreePort(t), name))
	path := filepath.Join(ca.Dir, "perspective-"+name+".toml")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	p.proc = &harness.Proc{Name: "perspective-" + name, Dir: ca.Dir, Bin: "hallmark-worker", Args: []string{"--config", path}}
	p.proc.Start(t)
	t.Cleanup(func() { harness.StopAll(t, p.proc) })
	return p
}

// attacker answers every http-01 request on 127.0.0.2 at port with a
// well-formed key authorization of another account: what a hijacked
// route would lead a perspective to.
func attacker(t *testing.T, port int) {
	t.Helper()
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.2:%d", port))
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2 for the attacker's responder: %v", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := strings.TrimPrefix(r.URL.Path, "/.well-known/acme-challenge/")
		fmt.Fprintf(w, "%s.%s", token, "AttackersAccountThumbprintXXXXXXXXXXXXXXXXX")
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// perspectiveProfiles are the test's profiles: default requires network
// perspectives, plain does not.
const perspectiveProfiles = `
[profiles.default]
backend = "local"
validity_hours = 240
key_types = ["rsa2048", "p256"]
challenges = ["http-01"]
identifier_types = ["dns"]
perspectives = true

[profiles.plain]
backend = "local"
validity_hours = 240
key_types = ["rsa2048", "p256"]
challenges = ["http-01"]
identifier_types = ["dns"]
`

// TestPerspectivesQuorum is multi-perspective validation end to end on
// PostgreSQL: a primary worker and three perspective workers, each with
// its own resolver. Honest, lego gets a certificate; one perspective
// hijacked (its resolver answers the attacker's address) is outvoted; two
// hijacked fail the validation with a problem naming them; one stopped
// still gives a verdict, at its deadline. The same for CAA records only
// some perspectives see. A profile without perspectives asks none, and its
// authorization is not reused by the profile that requires them.
func TestPerspectivesQuorum(t *testing.T) {
	requireTool(t, "lego", "apt-get install lego")
	const deadline = 4 * time.Second
	ca := harness.StartCA(t, testdb.Postgres(t), harness.Options{
		Challenge: fmt.Sprintf("\n[challenge.perspectives]\nnames = [\"east\", \"west\", \"north\"]\ndeadline_ms = %d", deadline.Milliseconds()),
		Tables:    perspectiveProfiles,
	})
	ps := map[string]*perspective{}
	for _, n := range []string{"east", "west", "north"} {
		ps[n] = startPerspective(t, ca, n)
	}
	attacker(t, ca.HTTPPort)
	path := t.TempDir()
	run := func(name string) (string, error) {
		t.Helper()
		return lego(t, ca, path, "--domains", name, "--http", "--http.port", fmt.Sprintf("127.0.0.1:%d", ca.HTTPPort), "run")
	}
	mustIssue := func(name string) {
		t.Helper()
		if out, err := run(name); err != nil {
			t.Fatalf("lego run for %s: %v\n%s\n--- primary:\n%s", name, err, out, harness.Tail(ca.Log("worker"), 40))
		}
		if cert := readCert(t, filepath.Join(path, "certificates", name+".crt")); cert.DNSNames[0] != name {
			t.Fatalf("certificate for %v, want %s", cert.DNSNames, name)
		}
	}
	mustFail := func(name, problem string, disagreed ...string) {
		t.Helper()
		out, err := run(name)
		if err == nil {
			t.Fatalf("lego got a certificate for %s though %v did not corroborate:\n%s", name, disagreed, out)
		}
		if !strings.Contains(out, problem) || !strings.Contains(out, "network perspectives did not corroborate") {
			t.Fatalf("lego's error for %s does not carry a %s problem from the quorum:\n%s", name, problem, out)
		}
		for _, n := range disagreed {
			if !strings.Contains(out, n+" saw") {
				t.Errorf("the problem for %s does not name perspective %s:\n%s", name, n, out)
			}
		}
	}

	// answers are the perspectives' answers `hallmark orders show --json`
	// prints for the order of name, by perspective.
	answers := func(name string) map[string]string {
		t.Helper()
		var list []struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal([]byte(ca.Run("hallmark", "--config", ca.Config, "orders", "list", "--json", "--identifier", name)), &list); err != nil || len(list) == 0 {
			t.Fatalf("orders list for %s: %v (%d orders)", name, err, len(list))
		}
		var d struct {
			Authorizations []struct {
				Challenges []struct {
					Type         string `json:"type"`
					Perspectives []struct {
						Perspective, Outcome string
						TookMS               float64 `json:"took_ms"`
					} `json:"perspectives"`
				} `json:"challenges"`
			} `json:"authorizations"`
		}
		if err := json.Unmarshal([]byte(ca.Run("hallmark", "--config", ca.Config, "orders", "show", "--json", list[0].ID)), &d); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, ch := range d.Authorizations[0].Challenges {
			for _, p := range ch.Perspectives {
				got[p.Perspective] = p.Outcome
			}
		}
		return got
	}
	want := func(name string, w map[string]string) {
		t.Helper()
		if got := answers(name); !maps.Equal(got, w) {
			t.Errorf("orders show for %s: perspectives answered %v, want %v", name, got, w)
		}
	}

	t.Run("honest", func(t *testing.T) {
		mustIssue("honest.persp.test")
		want("honest.persp.test", map[string]string{"primary": "valid", "east": "valid", "west": "valid", "north": "valid"})
	})
	t.Run("one hijacked", func(t *testing.T) {
		ps["east"].dns.SetAddrs("one.persp.test", "127.0.0.2")
		mustIssue("one.persp.test")
		want("one.persp.test", map[string]string{"primary": "valid", "east": "invalid", "west": "valid", "north": "valid"})
	})
	t.Run("two hijacked", func(t *testing.T) {
		ps["east"].dns.SetAddrs("two.persp.test", "127.0.0.2")
		ps["west"].dns.SetAddrs("two.persp.test", "127.0.0.2")
		mustFail("two.persp.test", "unauthorized", "east", "west")
		want("two.persp.test", map[string]string{"primary": "valid", "east": "invalid", "west": "invalid", "north": "valid"})
	})
	t.Run("profile without perspectives", func(t *testing.T) {
		// plain asks no perspective: two hijacked do not stop it, and
		// none answered.
		ps["east"].dns.SetAddrs("plain.persp.test", "127.0.0.2")
		ps["west"].dns.SetAddrs("plain.persp.test", "127.0.0.2")
		l := harness.Lego{Bin: requireTool(t, "lego", "apt-get install lego"), Directory: ca.BaseURL + "/profile/plain/directory",
			Root: ca.Root, Email: "e2e@hallmark.test", Path: path}
		if out, err := l.Run(t.Context(), "--domains", "plain.persp.test", "--http", "--http.port", fmt.Sprintf("127.0.0.1:%d", ca.HTTPPort), "run"); err != nil {
			t.Fatalf("lego run under profile plain: %v\n%s", err, out)
		}
		want("plain.persp.test", map[string]string{})
		// The same account under default, which requires perspectives, does
		// not reuse that authorization: it validates again, and the two
		// hijacked perspectives refuse it.
		mustFail("plain.persp.test", "unauthorized", "east", "west")
		var list []struct{ Account, Profile, Status string }
		if err := json.Unmarshal([]byte(ca.Run("hallmark", "--config", ca.Config, "orders", "list", "--json", "--identifier", "plain.persp.test")), &list); err != nil ||
			len(list) != 2 || list[0].Account != list[1].Account || list[0].Profile == list[1].Profile {
			t.Fatalf("orders of plain.persp.test: %+v, %v; want one of each profile, of one account", list, err)
		}
	})
	t.Run("caa seen by one", func(t *testing.T) {
		ps["north"].dns.SetCAA("caa1.persp.test", 0, "issue", "other-ca.example")
		mustIssue("caa1.persp.test")
	})
	t.Run("caa seen by two", func(t *testing.T) {
		ps["west"].dns.SetCAA("caa2.persp.test", 0, "issue", "other-ca.example")
		ps["north"].dns.SetCAA("caa2.persp.test", 0, "issue", "other-ca.example")
		mustFail("caa2.persp.test", "caa", "west", "north")
	})
	t.Run("one stopped", func(t *testing.T) {
		ps["north"].proc.Stop()
		start := time.Now()
		mustIssue("stopped.persp.test")
		t.Logf("issued with north stopped in %s (deadline %s)", time.Since(start).Round(time.Millisecond), deadline)
		// north never answered: the verdict came at the deadline without it.
		want("stopped.persp.test", map[string]string{"primary": "valid", "east": "valid", "west": "valid"})
	})
	t.Run("two stopped", func(t *testing.T) {
		ps["west"].proc.Stop()
		out, err := run("stopped2.persp.test")
		if err == nil || !strings.Contains(out, "serverInternal") ||
			!strings.Contains(out, "west did not answer within 4s") || !strings.Contains(out, "north did not answer within 4s") {
			t.Fatalf("with two of three perspectives stopped: %v, want a serverInternal problem naming both\n%s", err, out)
		}
	})
}
