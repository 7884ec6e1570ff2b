package replicas

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite"

	"github.com/hallmark-ca/hallmark/tests/harness"
)

// jobRow is what these tests read of one River job.
type jobRow struct {
	id          int64
	kind, state string
	lastBy      string    // the worker of the latest attempt
	attempt     int       // the latest attempt's number
	attemptedAt time.Time // when it began, on the database's clock
	lastError   string    // the attempt log's latest line
	subject     string    // challenge_id or order_id
}

// jobsDB reads River's jobs on either store: pgx on PostgreSQL, a
// database/sql handle on the SQLite file (as another process would).
type jobsDB struct {
	pg   *pgx.Conn
	lite *sql.DB
}

func openJobsDB(t *testing.T, c *cluster) *jobsDB {
	t.Helper()
	if path, ok := strings.CutPrefix(c.dbURL, "sqlite:"); ok {
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		t.Cleanup(func() { _ = db.Close() })
		return &jobsDB{lite: db}
	}
	return &jobsDB{pg: c.db(context.Background())}
}

const (
	jobsPG = `SELECT id, kind, state::text, attempted_by[array_length(attempted_by, 1)], attempt, attempted_at,
  COALESCE(errors[array_length(errors, 1)]->>'error', ''), COALESCE(args->>'challenge_id', args->>'order_id', '')
  FROM river_job WHERE kind IN ('challenge_validate', 'signer_issue') AND attempted_by IS NOT NULL`
	jobsLite = `SELECT id, kind, state, json_extract(attempted_by, '$[#-1]'), attempt,
  CAST(unixepoch(attempted_at, 'subsec') * 1000000 AS INTEGER),
  COALESCE(json_extract(errors, '$[#-1].error'), ''), COALESCE(json_extract(args, '$.challenge_id'), json_extract(args, '$.order_id'), '')
  FROM river_job WHERE kind IN ('challenge_validate', 'signer_issue') AND attempted_by IS NOT NULL`
)

// jobs reads the validation and signing jobs that have been attempted.
func (d *jobsDB) jobs(t *testing.T, ctx context.Context) map[int64]jobRow {
	t.Helper()
	out := map[int64]jobRow{}
	if d.pg != nil {
		rows, err := d.pg.Query(ctx, jobsPG)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var j jobRow
			if err := rows.Scan(&j.id, &j.kind, &j.state, &j.lastBy, &j.attempt, &j.attemptedAt, &j.lastError, &j.subject); err != nil {
				t.Fatal(err)
			}
			out[j.id] = j
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	rows, err := d.lite.QueryContext(ctx, jobsLite)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var j jobRow
		var at int64
		if err := rows.Scan(&j.id, &j.kind, &j.state, &j.lastBy, &j.attempt, &at, &j.lastError, &j.subject); err != nil {
			t.Fatal(err)
		}
		j.attemptedAt = time.UnixMicro(at)
		out[j.id] = j
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// heldBy is the running jobs whose latest attempt is worker's.
func (d *jobsDB) heldBy(t *testing.T, ctx context.Context, worker string) map[int64]jobRow {
	out := map[int64]jobRow{}
	for id, j := range d.jobs(t, ctx) {
		if j.state == "running" && j.lastBy == worker {
			out[id] = j
		}
	}
	return out
}

// kinds counts jobs by kind.
func kinds(js map[int64]jobRow) map[string]int {
	out := map[string]int{}
	for _, j := range js {
		out[j.kind]++
	}
	return out
}

// settle waits until no session of the stopped or killed worker is still
// executing a statement (PostgreSQL; SQLite's statements run in the
// process itself).
func (d *jobsDB) settle(t *testing.T, ctx context.Context, worker string) {
	if d.pg == nil {
		return
	}
	for i := 0; i < 100; i++ {
		var active int
		if err := d.pg.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND state = 'active'`, worker).Scan(&active); err != nil {
			t.Fatal(err)
		}
		if active == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s's sessions still execute statements 5s after it was stopped", worker)
}

// TestKilledWorkerJobsResumeInSeconds: a worker killed (SIGKILL) while it
// holds validation and signing jobs under load has every one of them
// started again by the other, live worker within 10 s of the kill, on both
// stores, with River's own rescue (rescue_after_ms) left at its default
// minute: the heartbeat did it. No job of the live worker is ever taken,
// and every client gets its certificate.
func TestKilledWorkerJobsResumeInSeconds(t *testing.T) {
	requireTool(t, "lego", "apt-get install lego")
	for _, d := range harness.Dialects {
		t.Run(d.Name, func(t *testing.T) {
			c := startCluster(t, d.URL(t), options{frontends: 1, workers: 2, challengeTimeoutMS: 7000})
			c.legoExtra = []string{"--cert.timeout", "120"}
			ctx, cancel := context.WithTimeout(context.Background(), 170*time.Second)
			defer cancel()
			w1, w2 := c.workers[0], c.workers[1]
			// Enough clients that worker1 is seen holding both kinds at
			// once, a signing job lasting milliseconds, on a loaded machine.
			const n = 32
			for i := 0; i < n; i++ {
				d := 150 * time.Millisecond
				if i%2 == 1 {
					d = 4 * time.Second // held at the target: running validations
				}
				c.slow(fmt.Sprintf("rescue%d.replicas.test", i), d)
			}
			wait := runAsync(ctx, c, "rescue", n, 2, 150*time.Millisecond)
			db := openJobsDB(t, c)

			// Freeze worker1 the moment it holds both kinds, then kill it
			// at once: a frozen process changes nothing, so what it held
			// at the freeze it holds at the kill.
			var caught map[int64]jobRow
			var killedAt time.Time
			for deadline := time.Now().Add(90 * time.Second); caught == nil && time.Now().Before(deadline); {
				if k := kinds(db.heldBy(t, ctx, w1.Name)); k["challenge_validate"] == 0 || k["signer_issue"] == 0 {
					time.Sleep(2 * time.Millisecond)
					continue
				}
				_ = w1.Cmd.Process.Signal(syscall.SIGSTOP)
				db.settle(t, ctx, w1.Name)
				h := db.heldBy(t, ctx, w1.Name)
				if k := kinds(h); k["challenge_validate"] == 0 || k["signer_issue"] == 0 {
					_ = w1.Cmd.Process.Signal(syscall.SIGCONT)
					continue
				}
				_ = w1.Cmd.Process.Signal(syscall.SIGKILL)
				killedAt = time.Now()
				caught = h
			}
			if caught == nil {
				t.Fatal("worker1 never held a challenge_validate and a signer_issue job at once within 90s")
			}
			c.kill(w1) // reaps it
			t.Logf("worker1 killed holding %v", kinds(caught))

			// Each caught job's next attempt is worker2's; when it began
			// is in the job's row.
			var waits []time.Duration
			for deadline := time.Now().Add(60 * time.Second); len(waits) < len(caught); time.Sleep(100 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("only %d of %d jobs of the killed worker started again within 60s", len(waits), len(caught))
				}
				waits = waits[:0]
				all := db.jobs(t, ctx)
				for id, was := range caught {
					j := all[id]
					if j.lastBy == w1.Name {
						break
					}
					if j.lastBy != w2.Name || j.attempt <= was.attempt {
						t.Fatalf("job %d (%s): attempt %d by %s after the kill, want a later attempt than %d, by %s", id, j.kind, j.attempt, j.lastBy, was.attempt, w2.Name)
					}
					waits = append(waits, j.attemptedAt.Sub(killedAt))
				}
			}
			sort.Slice(waits, func(i, j int) bool { return waits[i] < waits[j] })
			p100 := waits[len(waits)-1]
			t.Logf("%d jobs of the killed worker started again on worker2: p50 %s, p100 %s after the kill (heartbeat_ms 5000, rescue_after_ms 60000)",
				len(waits), waits[len(waits)/2].Round(time.Millisecond), p100.Round(time.Millisecond))
			if p100 > 10*time.Second {
				t.Errorf("the last job of the killed worker started again %s after the kill, want within 10s", p100.Round(time.Millisecond))
			}

			ok, fails := wait()
			if ok != n {
				t.Fatalf("%d of %d clients got no certificate; first:\n%s", n-ok, n, fails[0])
			}
			// Never a live worker's job: no attempt log names worker2 as lapsed.
			for id, j := range db.jobs(t, ctx) {
				if strings.Contains(j.lastError, "worker "+w2.Name+" stopped renewing") {
					t.Errorf("job %d of the live worker2 was taken: %s", id, j.lastError)
				}
			}
			if d.Name == "postgres" {
				if certs := c.checkBooks(ctx); certs != n {
					t.Errorf("%d certificates stored, want %d", certs, n)
				}
			}
		})
	}
}

// TestStalledWorkerRecordsNoVerdict: a worker frozen (SIGSTOP) for longer
// than its heartbeat bound while it holds validations has them taken and
// decided by the other worker; thawed (SIGCONT), it notices its heartbeat
// lapsed and records no verdict for any of them, though the answers its
// validations waited for arrived while it was frozen.
func TestStalledWorkerRecordsNoVerdict(t *testing.T) {
	requireTool(t, "lego", "apt-get install lego")
	for _, d := range harness.Dialects {
		t.Run(d.Name, func(t *testing.T) {
			c := startCluster(t, d.URL(t), options{frontends: 1, workers: 2, deferWorkers: true, challengeTimeoutMS: 20000})
			c.legoExtra = []string{"--cert.timeout", "120"}
			ctx, cancel := context.WithTimeout(context.Background(), 170*time.Second)
			defer cancel()
			w1, w2 := c.workers[0], c.workers[1]
			c.start(w1)
			const n = 4
			var releases []func()
			for i := 0; i < n; i++ {
				releases = append(releases, c.gate(fmt.Sprintf("stall%d.replicas.test", i)))
			}
			wait := runAsync(ctx, c, "stall", n, 1, 100*time.Millisecond)
			db := openJobsDB(t, c)
			var caught map[int64]jobRow
			for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				if caught = db.heldBy(t, ctx, w1.Name); kinds(caught)["challenge_validate"] == n {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("worker1 holds %v after 60s, want %d validations", kinds(caught), n)
				}
			}
			_ = w1.Cmd.Process.Signal(syscall.SIGSTOP)
			stoppedAt := time.Now()
			c.start(w2)
			for _, r := range releases {
				r() // worker1's requests are answered too, while it is frozen
			}
			logOffset := len(c.logOf(w1))
			for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				all, done := db.jobs(t, ctx), 0
				for id := range caught {
					if j := all[id]; j.lastBy == w2.Name && j.state == "completed" {
						done++
					}
				}
				if done == n {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d of worker1's %d validations decided by worker2 60s after worker1 froze", done, n)
				}
			}
			t.Logf("worker2 decided all %d validations of the frozen worker1 %s after it froze", n, time.Since(stoppedAt).Round(time.Millisecond))
			_ = w1.Cmd.Process.Signal(syscall.SIGCONT)

			ok, fails := wait()
			if ok != n {
				t.Fatalf("%d of %d clients got no certificate; first:\n%s", n-ok, n, fails[0])
			}
			// Give the thawed worker time to act on what it held.
			time.Sleep(3 * time.Second)
			after := c.logOf(w1)[logOffset:]
			if !strings.Contains(after, "heartbeat lapsed") {
				t.Errorf("the thawed worker1 never logged that its heartbeat lapsed:\n%s", tail(after, 3000))
			}
			for _, j := range caught {
				for _, line := range strings.Split(after, "\n") {
					if strings.Contains(line, j.subject) && strings.Contains(line, "challenge validated") {
						t.Errorf("the thawed worker1 recorded a verdict for challenge %s, which worker2 had taken: %s", j.subject, line)
					}
				}
			}
			if strings.Contains(c.logOf(w2), "stopped renewing") || strings.Contains(c.logOf(w2), "lapsed_worker=worker2") {
				t.Error("a job of the live worker2 was taken")
			}
			if d.Name == "postgres" {
				c.checkBooks(ctx)
			}
		})
	}
}
