package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hallmark-ca/hallmark/tests/harness"
	"github.com/hallmark-ca/hallmark/tests/testdns"
)

// perspective is one remote perspective: a hallmark-worker process started
// with worker.perspective, resolving through its own DNS server.
type perspective struct {
	name   string
	dns    *testdns.Server
	proc   *harness.Proc
	health string // the process's health_listen: /readyz, /metrics
}

// startPerspective starts a perspective worker of ca named name with its
// own DNS server.
func startPerspective(t *testing.T, ca *CA, name string) *perspective {
	t.Helper()
	p := &perspective{name: name, dns: testdns.Start(t)}
	p.proc, p.health = servePerspective(t, ca, name, p.dns.Addr, "perspective-"+name)
	return p
}

// servePerspective starts a hallmark-worker serving perspective name for
// ca, its configuration ca's but for its name, its resolver and its health
// port, its log procName.log; it stops when the test ends.
func servePerspective(t *testing.T, ca *CA, name, resolver, procName string) (*harness.Proc, string) {
	t.Helper()
	b, err := os.ReadFile(ca.Config)
	if err != nil {
		t.Fatal(err)
	}
	health := fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
	conf := regexp.MustCompile(`(?m)^resolvers = .*$`).ReplaceAllString(string(b), fmt.Sprintf("resolvers = [%q]", resolver))
	conf = regexp.MustCompile(`(?m)^health_listen = .*$`).ReplaceAllString(conf,
		fmt.Sprintf("health_listen = %q\nperspective = %q", health, name))
	path := filepath.Join(ca.Dir, procName+".toml")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	proc := &harness.Proc{Name: procName, Dir: ca.Dir, Bin: "hallmark-worker", Args: []string{"--config", path}}
	proc.Start(t)
	t.Cleanup(func() { harness.StopAll(t, proc) })
	return proc, health
}

// waitReady waits until the worker whose health_listen is health is ready.
func waitReady(t *testing.T, proc *harness.Proc, health string) {
	t.Helper()
	if !harness.WaitOK(http.DefaultClient, "http://"+health+"/readyz", time.Now().Add(30*time.Second)) {
		t.Fatalf("%s is not ready after 30s:\n%s", proc.Name, harness.Tail(proc.Log(), 3000))
	}
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

// quorumRun is TestPerspectivesQuorum's CA, perspectives and lego account,
// and the tally of what the primary's metrics must count.
type quorumRun struct {
	ca       *CA
	ps       map[string]*perspective
	path     string // lego's account and certificates
	conn     *pgx.Conn
	deadline time.Duration
	// counted is hallmark_perspective_answers_total as the subtests
	// expect it: perspective → result → verdicts.
	counted map[string]map[string]int
}

// expect records that each of names took part in one more verdict with
// result (agreed, disagreed, error, timeout).
func (q *quorumRun) expect(result string, names ...string) {
	for _, n := range names {
		if q.counted[n] == nil {
			q.counted[n] = map[string]int{}
		}
		q.counted[n][result]++
	}
}

func (q *quorumRun) run(t *testing.T, name string) (string, error) {
	t.Helper()
	return lego(t, q.ca, q.path, "--domains", name, "--http", "--http.port", fmt.Sprintf("127.0.0.1:%d", q.ca.HTTPPort), "run")
}

func (q *quorumRun) mustIssue(t *testing.T, name string) {
	t.Helper()
	if out, err := q.run(t, name); err != nil {
		t.Fatalf("lego run for %s: %v\n%s\n--- primary:\n%s", name, err, out, harness.Tail(q.ca.Log("worker"), 40))
	}
	if cert := readCert(t, filepath.Join(q.path, "certificates", name+".crt")); cert.DNSNames[0] != name {
		t.Fatalf("certificate for %v, want %s", cert.DNSNames, name)
	}
}

func (q *quorumRun) mustFail(t *testing.T, name, problem string, disagreed ...string) {
	t.Helper()
	out, err := q.run(t, name)
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
// prints for the latest order of name, by perspective.
func (q *quorumRun) answers(t *testing.T, name string) map[string]string {
	t.Helper()
	var list []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(q.ca.Run("hallmark", "--config", q.ca.Config, "orders", "list", "--json", "--identifier", name)), &list); err != nil || len(list) == 0 {
		t.Fatalf("orders list for %s: %v (%d orders)", name, err, len(list))
	}
	var d struct {
		Authorizations []struct {
			Challenges []struct {
				Perspectives []struct{ Perspective, Outcome string } `json:"perspectives"`
			} `json:"challenges"`
		} `json:"authorizations"`
	}
	if err := json.Unmarshal([]byte(q.ca.Run("hallmark", "--config", q.ca.Config, "orders", "show", "--json", list[0].ID)), &d); err != nil {
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

func (q *quorumRun) want(t *testing.T, name string, w map[string]string) {
	t.Helper()
	if got := q.answers(t, name); !maps.Equal(got, w) {
		t.Errorf("orders show for %s: perspectives answered %v, want %v", name, got, w)
	}
}

// challengeOf is the id of the challenge the primary asked the
// perspectives about for name: the one with the primary's answer.
func (q *quorumRun) challengeOf(t *testing.T, name string) string {
	t.Helper()
	var id string
	err := q.conn.QueryRow(context.Background(), `SELECT c.id FROM challenges c JOIN authorizations a ON a.id = c.authz_id
JOIN perspective_answers p ON p.challenge_id = c.id AND p.perspective = 'primary'
WHERE a.identifier_value = $1 ORDER BY p.answered_at DESC LIMIT 1`, name).Scan(&id)
	if err != nil {
		t.Fatalf("the corroborated challenge of %s: %v", name, err)
	}
	return id
}

// verdictLag is how long after the primary's own answer the challenge of
// name got its verdict, on the database's clock.
func (q *quorumRun) verdictLag(t *testing.T, name string) time.Duration {
	t.Helper()
	var secs float64
	err := q.conn.QueryRow(context.Background(), `SELECT extract(epoch FROM c.updated_at - p.answered_at) FROM challenges c
JOIN perspective_answers p ON p.challenge_id = c.id AND p.perspective = 'primary' WHERE c.id = $1 AND c.status <> 'processing'`,
		q.challengeOf(t, name)).Scan(&secs)
	if err != nil {
		t.Fatalf("the verdict of %s: %v", name, err)
	}
	return time.Duration(secs * float64(time.Second))
}

// answeredIn counts the "perspective answered" lines a perspective worker
// logged for challenge id: the checks it ran for it.
func answeredIn(log, id string) int {
	n := 0
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "perspective answered") && strings.Contains(line, "challenge="+id) {
			n++
		}
	}
	return n
}

// metric is the value of the sample name{labels} on a /metrics page, where
// labels is the label set as the text format prints it; -1 when absent.
func metric(page, name, labels string) float64 {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name+"{"+labels+"}") + ` (\S+)$`)
	m := re.FindStringSubmatch(page)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return -1
	}
	return v
}
