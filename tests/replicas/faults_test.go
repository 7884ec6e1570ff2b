package replicas

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// runAsync starts n lego clients for prefix<i>, each retrying up to tries
// times, and returns a function that waits for them and reports failures.
func runAsync(ctx context.Context, c *cluster, prefix string, n, tries int, stagger time.Duration) func() (int, []string) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	ok, fails := 0, []string{}
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			name := fmt.Sprintf("%s%d.replicas.test", prefix, i)
			_, out, err := c.legoUntil(ctx, filepath.Join(c.dir, "lego", name), name, tries)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				fails = append(fails, fmt.Sprintf("%s: %v\n%s", name, err, tail(out, 1500)))
				return
			}
			ok++
		}(i)
		time.Sleep(stagger)
	}
	return func() (int, []string) { wg.Wait(); return ok, fails }
}

// held counts the running jobs of each kind whose current attempt is the
// worker's.
func held(ctx context.Context, conn *pgx.Conn, worker string) (map[string][]int64, error) {
	rows, err := conn.Query(ctx, `SELECT kind, id FROM river_job WHERE state = 'running' AND attempted_by[array_length(attempted_by, 1)] = $1`, worker)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]int64{}
	for rows.Next() {
		var kind string
		var id int64
		if err := rows.Scan(&kind, &id); err != nil {
			return nil, err
		}
		out[kind] = append(out[kind], id)
	}
	return out, rows.Err()
}

// heldSettled is held for a worker just stopped: a statement it sent
// before the stop still runs and commits (River's batched completion of a
// job it had finished, seen in CI as a job "held" at the kill but
// completed by the killed worker, once even after two reads 300 ms apart
// agreed: the statement was still executing). So it first waits until
// none of the worker's sessions (named after it, withApplicationName) is
// executing a statement — one stopped inside a transaction stays open and
// is rolled back at the kill — then reads until two reads 300 ms apart
// agree. A stopped worker cannot go on changing its jobs, so not settling
// within ten reads is an error.
func heldSettled(ctx context.Context, conn *pgx.Conn, worker string) (map[string][]int64, error) {
	for i := 0; ; i++ {
		var sessions, active int
		if err := conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'active') FROM pg_stat_activity WHERE application_name = $1`, worker).Scan(&sessions, &active); err != nil {
			return nil, err
		}
		if sessions == 0 {
			return nil, fmt.Errorf("no PostgreSQL session is named %s: is application_name in its database URL?", worker)
		}
		if active == 0 {
			break
		}
		if i == 100 {
			return nil, fmt.Errorf("%s's sessions still execute %d statement(s) 10s after it was stopped", worker, active)
		}
		time.Sleep(100 * time.Millisecond)
	}
	prev, err := held(ctx, conn, worker)
	for i := 0; err == nil && i < 10; i++ {
		time.Sleep(300 * time.Millisecond)
		var h map[string][]int64
		if h, err = held(ctx, conn, worker); err == nil && reflect.DeepEqual(h, prev) {
			return h, nil
		}
		prev = h
	}
	if err == nil {
		err = fmt.Errorf("the jobs %s holds still changed after it was stopped: %v", worker, prev)
	}
	return nil, err
}

// TestWorkerKilledHoldingJobs: worker1 is frozen (SIGSTOP) at a moment it
// holds both a challenge_validate and a signer_issue job, then killed
// (SIGKILL); worker2, started afterwards, finishes them once River's
// rescuer finds them stuck, and every client gets its certificate.
func TestWorkerKilledHoldingJobs(t *testing.T) {
	requireTool(t, "lego", "apt-get install lego")
	c := startCluster(t, testdb.Postgres(t), options{frontends: 1, workers: 2, deferWorkers: true,
		worker: "job_timeout_ms = 8000\nrescue_after_ms = 9000", challengeTimeoutMS: 7000})
	// The finalize poll outlasts the rescue (9s + River's 30s rescuer).
	c.legoExtra = []string{"--cert.timeout", "120"}
	ctx, cancel := context.WithTimeout(context.Background(), 170*time.Second)
	defer cancel()
	w1, w2 := c.workers[0], c.workers[1]
	c.start(w1)
	const n = 8
	for i := 0; i < n; i++ {
		// Odd clients' validations are held 5s at the target, so their
		// challenge jobs are running while even clients' orders are signed.
		d := 200 * time.Millisecond
		if i%2 == 1 {
			d = 5 * time.Second
		}
		c.slow(fmt.Sprintf("kill%d.replicas.test", i), d)
	}
	wait := runAsync(ctx, c, "kill", n, 2, 300*time.Millisecond)

	conn := c.db(ctx)
	var caught map[string][]int64
	deadline := time.Now().Add(60 * time.Second)
	for caught == nil && time.Now().Before(deadline) {
		h, err := held(ctx, conn, w1.Name)
		if err != nil {
			t.Fatal(err)
		}
		if len(h["challenge_validate"]) == 0 || len(h["signer_issue"]) == 0 {
			continue
		}
		_ = w1.Cmd.Process.Signal(syscall.SIGSTOP)
		// Frozen: what it holds once its last statements have landed it
		// holds until it dies.
		h, err = heldSettled(ctx, conn, w1.Name)
		if err != nil {
			t.Fatal(err)
		}
		if len(h["challenge_validate"]) > 0 && len(h["signer_issue"]) > 0 {
			caught = h
			break
		}
		_ = w1.Cmd.Process.Signal(syscall.SIGCONT)
	}
	if caught == nil {
		t.Fatal("worker1 never held a challenge_validate and a signer_issue job at once within 60s")
	}
	c.kill(w1)
	killedAt := time.Now()
	t.Logf("worker1 killed holding challenge_validate %v and signer_issue %v", caught["challenge_validate"], caught["signer_issue"])
	c.start(w2)

	ok, fails := wait()
	if ok != n {
		t.Fatalf("%d of %d clients got no certificate; first:\n%s", n-ok, n, fails[0])
	}
	t.Logf("all %d clients got certificates %s after the kill", n, time.Since(killedAt).Round(time.Millisecond))
	for kind, ids := range caught {
		for _, id := range ids {
			var state string
			var by []string
			// River marks a job completed in a batch after the handler
			// returns, once its verdict committed, so the clients can
			// finish a moment before their jobs do.
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				if err := conn.QueryRow(ctx, `SELECT state, attempted_by FROM river_job WHERE id = $1`, id).Scan(&state, &by); err != nil {
					t.Fatal(err)
				}
				if state == "completed" || time.Now().After(deadline) {
					break
				}
			}
			if state != "completed" || by[len(by)-1] != w2.Name {
				t.Errorf("%s job %d: state %s attempted by %v, want completed by %s", kind, id, state, by, w2.Name)
			}
		}
	}
	certs := c.checkBooks(ctx)
	if certs != n {
		t.Errorf("%d certificates stored, want %d", certs, n)
	}
	// worker2 signed what worker1 had not stored; together no more than n.
	if s2 := c.signed(w2); s2 < 1 || s2 > n {
		t.Errorf("worker2 signed %d certificates", s2)
	}
}

// TestBlackholedTargetHoldsNoPermit: validations of a target that never
// answers run in the worker, so they hold no frontend admission permit;
// with max_concurrent_requests = 3 and three validations hanging, other
// clients keep getting certificates meanwhile. What is asserted is
// structure, never a duration (performance is measured by benchmarks):
// the permits in use, sampled while the validations hang, fall to zero
// (a permit held by a hanging validation would be in use at every
// sample), and the other clients' orders become valid while the very
// same black-holed challenges are still processing and their
// connections still open.
func TestBlackholedTargetHoldsNoPermit(t *testing.T) {
	requireTool(t, "lego", "apt-get install lego")
	// The black-holed validations must outlast the six issuances however
	// slow the machine (the assertions below need them still hanging at
	// the end), so they time out only long after: the timeout bounds no
	// assertion.
	c := startCluster(t, testdb.Postgres(t), options{frontends: 1, workers: 1,
		server: "max_concurrent_requests = 3", worker: "job_timeout_ms = 110000\nrescue_after_ms = 120000", challengeTimeoutMS: 100000})
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	metricsURL := "http://" + c.frontends[0].addr + "/metrics"

	// Baseline: one certificate with nothing else going on (logged only).
	start := time.Now()
	if _, out, err := c.legoUntil(ctx, filepath.Join(c.dir, "lego", "base"), "base.replicas.test", 2); err != nil {
		t.Fatalf("baseline lego: %v\n%s", err, out)
	}
	baseline := time.Since(start)

	const holes = 3
	for i := 0; i < holes; i++ {
		c.blackhole(fmt.Sprintf("hole%d.replicas.test", i))
	}
	holeCtx, holeCancel := context.WithCancel(ctx)
	defer holeCancel()
	waitHoles := runAsync(holeCtx, c, "hole", holes, 1, 700*time.Millisecond)
	deadline := time.Now().Add(20 * time.Second)
	for c.holeOpen.Load() < holes {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d black-holed validations started", c.holeOpen.Load(), holes)
		}
		time.Sleep(50 * time.Millisecond)
	}
	conn := c.db(ctx)
	// The challenges whose validations hang: each client's http-01, claimed
	// (processing) and in the worker.
	hung := processingChallenges(t, ctx, conn, "hole%")
	if len(hung) != holes {
		t.Fatalf("%d black-holed challenges processing (%v), want %d", len(hung), hung, holes)
	}

	// Three validations hang now, and no request holds a permit for
	// them: sample the permits in use. Only the clients' polls take one,
	// each for a moment.
	quiet := samplePermits(t, metricsURL, 20, 50*time.Millisecond, nil)
	if quiet.max > 1 {
		t.Errorf("%v admission permits in use while only black-holed validations were running, want at most 1 (a client's poll)", quiet.max)
	}
	if quiet.min > 0 {
		t.Errorf("at least %v admission permits in use at each of %d samples while only black-holed validations were running: a hanging validation holds one", quiet.min, quiet.n)
	}

	// Others get certificates meanwhile, one after another, while the
	// permits go on being sampled.
	stopSampling := make(chan struct{})
	busyStats := make(chan permitStats, 1)
	go func() { busyStats <- samplePermits(t, metricsURL, 0, 100*time.Millisecond, stopSampling) }()
	start = time.Now()
	ok, fails := issueMany(ctx, c, "busy", 6, 1, 1)
	during := time.Since(start)
	close(stopSampling)
	busy := <-busyStats
	if ok != 6 {
		t.Fatalf("%d of 6 clients failed while validations hung; first:\n%s", 6-ok, fails[0])
	}
	_, metrics := get(metricsURL)
	rejected := metricValue(metrics, "hallmark_frontend_admission_rejected_total")
	t.Logf("baseline 1 certificate %s; 6 certificates one after another in %s while %d validations hung (information only, not asserted); permits in use: %v to %v over %d samples before, %v to %v over %d samples during; admission rejections %v",
		baseline.Round(time.Millisecond), during.Round(time.Millisecond), holes, quiet.min, quiet.max, quiet.n, busy.min, busy.max, busy.n, rejected)
	if busy.n > 0 && busy.min > 0 {
		t.Errorf("at least %v admission permits in use at each of %d samples while the others issued: a hanging validation holds one", busy.min, busy.n)
	}

	// The ordering: all six orders valid while the same black-holed
	// challenges are still processing (a challenge never returns to
	// processing) and their first connections still open (no new attempt
	// was made).
	if n := queryInt(t, ctx, conn, `SELECT count(DISTINCT o.id) FROM orders o JOIN order_identifiers i ON i.order_id = o.id WHERE i.value LIKE 'busy%' AND o.status = 'valid'`); n != 6 {
		t.Errorf("%d of the 6 other orders valid after their clients got certificates", n)
	}
	if still := processingChallenges(t, ctx, conn, "hole%"); !reflect.DeepEqual(still, hung) {
		t.Fatalf("black-holed challenges processing after the others issued: %v, want the same %v; the test proves nothing", still, hung)
	}
	if open, started := c.holeOpen.Load(), c.holeConns.Load(); open != holes || started != holes {
		t.Fatalf("%d black-holed validations still hanging of %d started after the others issued, want the same %d throughout; the test proves nothing", open, started, holes)
	}
	holeCancel()
	waitHoles()
}

// processingChallenges is the IDs, sorted, of the processing challenges
// of authorizations for names LIKE pattern.
func processingChallenges(t *testing.T, ctx context.Context, conn *pgx.Conn, pattern string) []string {
	t.Helper()
	rows, err := conn.Query(ctx, `SELECT c.id FROM challenges c JOIN authorizations a ON a.id = c.authz_id WHERE a.identifier_value LIKE $1 AND c.status = 'processing' ORDER BY c.id`, pattern)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// permitStats summarize samples of hallmark_frontend_requests_in_flight.
type permitStats struct {
	min, max float64
	n        int
}

// samplePermits reads the frontend's permits in use every interval, count
// times, or (count 0) until stop is closed. A sample it cannot read is an
// error, never a zero.
func samplePermits(t *testing.T, url string, count int, every time.Duration, stop <-chan struct{}) permitStats {
	var s permitStats
	for i := 0; count == 0 || i < count; i++ {
		if i > 0 {
			select {
			case <-stop:
				return s
			case <-time.After(every):
			}
		}
		status, m := get(url)
		v, err := strconv.ParseFloat(metricValue(m, "hallmark_frontend_requests_in_flight"), 64)
		if status != http.StatusOK || err != nil {
			t.Errorf("reading hallmark_frontend_requests_in_flight from %s: status %d, %v", url, status, err)
			return s
		}
		if s.n == 0 || v < s.min {
			s.min = v
		}
		s.max = max(s.max, v)
		s.n++
	}
	return s
}

func metricValue(metrics, name string) string {
	for _, l := range strings.Split(metrics, "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == name {
			return f[1]
		}
	}
	return ""
}

// TestWorkerWithoutKey: a worker whose key file is unavailable does not
// mount the profile, says so on /readyz, and leaves issuance jobs queued;
// the worker that has the key issues them.
func TestWorkerWithoutKey(t *testing.T) {
	requireTool(t, "lego", "apt-get install lego")
	c := startCluster(t, testdb.Postgres(t), options{frontends: 1, workers: 2, deferWorkers: true, noKey: map[int]bool{0: true}})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	nokey, haskey := c.workers[0], c.workers[1]
	c.start(nokey)
	deadline := time.Now().Add(20 * time.Second)
	var status int
	var body string
	for time.Now().Before(deadline) {
		if status, body = get("http://" + nokey.addr + "/readyz"); status != 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "database: ok") || !strings.Contains(body, "profile default: unavailable") {
		t.Fatalf("/readyz of the worker without the key: %d %q, want 503 naming the unavailable profile", status, body)
	}

	wait := runAsync(ctx, c, "nokey", 3, 1, 0)
	conn := c.db(ctx)
	// The orders reach the signing queue and stay there: validation ran
	// on the keyless worker, signing waits.
	deadline = time.Now().Add(40 * time.Second)
	for queuedIssues(t, ctx, conn) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d signer_issue jobs queued after 40s", queuedIssues(t, ctx, conn))
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(3 * time.Second)
	if q := queuedIssues(t, ctx, conn); q != 3 {
		t.Fatalf("%d signer_issue jobs still queued after 3s, want 3 (none taken by the keyless worker)", q)
	}
	if n := queryInt(t, ctx, conn, `SELECT count(*) FROM certificates`); n != 0 {
		t.Fatalf("%d certificates issued with no worker holding the key", n)
	}
	c.start(haskey)
	ok, fails := wait()
	if ok != 3 {
		t.Fatalf("%d of 3 clients got no certificate after the worker with the key started; first:\n%s", 3-ok, fails[0])
	}
	if s := c.signed(haskey); s != 3 {
		t.Errorf("the worker with the key signed %d, want 3", s)
	}
	if status, body := get("http://" + haskey.addr + "/readyz"); status != 200 || !strings.Contains(body, "profile default: mounted") {
		t.Errorf("/readyz of the worker with the key: %d %q", status, body)
	}
	c.checkBooks(ctx)
}

func queuedIssues(t *testing.T, ctx context.Context, conn *pgx.Conn) int {
	return queryInt(t, ctx, conn, `SELECT count(*) FROM river_job WHERE kind = 'signer_issue' AND state IN ('available', 'retryable', 'scheduled')`)
}

// privatePostgres runs a PostgreSQL cluster of the test's own (initdb into a
// temporary directory, on a free port), so the test can stop and start it
// without touching the machine's shared server. It returns the URL and the
// stop and start functions.
func privatePostgres(t *testing.T) (string, func(), func()) {
	pg := newPrivatePostgres(t)
	return pg.url, pg.stop, pg.start
}

// privatePG is a private PostgreSQL cluster: its URL, and pg_ctl stop
// (fast), start and restart (fast stop, then start), each waiting.
type privatePG struct {
	url                  string
	stop, start, restart func()
}

func newPrivatePostgres(t *testing.T) privatePG {
	t.Helper()
	bin := os.Getenv("HALLMARK_PG_BIN")
	if bin == "" {
		matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
		if len(matches) > 0 {
			bin = filepath.Dir(matches[len(matches)-1])
		}
	}
	if _, err := os.Stat(filepath.Join(bin, "initdb")); err != nil {
		requireTool(t, "initdb", "apt-get install postgresql (or set HALLMARK_PG_BIN to its bin directory)")
	}
	dir, err := os.MkdirTemp("", "hallmark-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	port := freePort(t)
	data := filepath.Join(dir, "data")
	// PostgreSQL refuses to run as root: run it as the postgres user then.
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root and there is no postgres user to run PostgreSQL as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	pg := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Dir = dir
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	pg("initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100", port, dir)
	start := func() {
		pg("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "pg.log"), "-w", "-t", "30", "start")
	}
	stop := func() { pg("pg_ctl", "-D", data, "-m", "fast", "-w", "-t", "30", "stop") }
	restart := func() {
		pg("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "pg.log"), "-m", "fast", "-w", "-t", "30", "restart")
	}
	start()
	t.Cleanup(func() {
		cmd := exec.Command(filepath.Join(bin, "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop")
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		_ = cmd.Run()
	})
	return privatePG{url: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port), stop: stop, start: start, restart: restart}
}

// TestPostgresRestart: the database is stopped in the middle of a run of
// lego issuances and started again: while it is down the frontends answer 503
// and the workers say they cannot claim; afterwards every client gets its
// certificate, nothing stranded, nothing signed twice.
func TestPostgresRestart(t *testing.T) {
	requireTool(t, "lego", "apt-get install lego")
	dbURL, stopDB, startDB := privatePostgres(t)
	c := startCluster(t, dbURL, options{frontends: 2, workers: 2, worker: "job_timeout_ms = 5000\nrescue_after_ms = 8000"})
	ctx, cancel := context.WithTimeout(context.Background(), 170*time.Second)
	defer cancel()
	const n = 12
	wait := runAsync(ctx, c, "pg", n, 6, 400*time.Millisecond)
	time.Sleep(2 * time.Second)

	stopDB()
	down := time.Now()
	time.Sleep(time.Second)
	for _, f := range c.frontends {
		if status, body := get("http://" + f.addr + "/readyz"); status != http.StatusServiceUnavailable {
			t.Errorf("%s /readyz with the database down: %d %q, want 503", f.Name, status, body)
		}
		// A request that needs the database gets the RFC's error document.
		if status, body := postAccountLookup(t, c, f); status != http.StatusServiceUnavailable || !strings.Contains(body, "serverInternal") {
			t.Errorf("%s answered an ACME POST with the database down: %d %s, want 503 serverInternal", f.Name, status, body)
		}
	}
	for _, w := range c.workers {
		if status, body := get("http://" + w.addr + "/readyz"); status != http.StatusServiceUnavailable || !strings.Contains(body, "not claiming") {
			t.Errorf("%s /readyz with the database down: %d %q, want 503 saying it is not claiming", w.Name, status, body)
		}
	}
	time.Sleep(3 * time.Second)
	startDB()
	t.Logf("database down for %s", time.Since(down).Round(time.Millisecond))

	ok, fails := wait()
	if ok != n {
		t.Fatalf("%d of %d clients got no certificate after the database returned; first:\n%s", n-ok, n, fails[0])
	}
	for _, w := range c.workers {
		if !strings.Contains(c.logOf(w), "database unreachable") {
			t.Errorf("%s never said it lost the database", w.Name)
		}
	}
	certs := c.checkBooks(ctx, c.workers...)
	if certs != n {
		t.Errorf("%d certificates stored, want %d", certs, n)
	}
}

// postAccountLookup posts a malformed-but-well-formed newAccount to a
// frontend directly: it needs the database (the nonce), so with the
// database down it must be a 503 problem document.
func postAccountLookup(t *testing.T, c *cluster, f *proc) (int, string) {
	t.Helper()
	hc := &http.Client{Timeout: 20 * time.Second}
	resp, err := hc.Head("http://" + f.addr + "/acme/new-nonce")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	body := signedNewAccount(t, c.base+"/acme/new-account", resp.Header.Get("Replay-Nonce"))
	req, _ := http.NewRequest(http.MethodPost, "http://"+f.addr+"/acme/new-account", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/jose+json")
	resp, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b := make([]byte, 4096)
	k, _ := resp.Body.Read(b)
	return resp.StatusCode, string(b[:k])
}

// TestSettingsAdvice: a frontend and a worker started against a database
// where a table Hallmark depends on is left out of autovacuum say so in
// their logs, naming the table, so the operator learns it before issuance
// slows as dead rows pile up.
func TestSettingsAdvice(t *testing.T) {
	c := startCluster(t, testdb.Postgres(t), options{frontends: 1, workers: 1, deferWorkers: true})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.db(ctx).Exec(ctx, `ALTER TABLE river_job SET (autovacuum_enabled = off)`); err != nil {
		t.Fatal(err)
	}
	fe, w := c.frontends[0], c.workers[0]
	// The frontend started before the table was changed: it said nothing
	// of it then, and says it after a restart.
	if strings.Contains(c.logOf(fe), "autovacuum is off for river_job") {
		t.Fatalf("the frontend named river_job before it was left out:\n%s", c.logOf(fe))
	}
	c.kill(fe)
	c.start(fe)
	c.start(w)
	for _, p := range []*proc{fe, w} {
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(c.logOf(p), "autovacuum is off for river_job") {
			if time.Now().After(deadline) {
				t.Fatalf("%s does not name river_job within 20s:\n%s", p.Name, c.logOf(p))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
