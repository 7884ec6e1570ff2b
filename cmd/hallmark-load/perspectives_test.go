package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestPerspectivesTarget starts the target hallmark-postgres-persp from the
// built binaries on PostgreSQL with two perspectives, drives four
// issuances, and reads the run's database: every challenge was answered
// by the primary and by each perspective, all valid, and every
// authorization is recorded corroborated. A target that started no
// perspective, or a profile that did not require them, would leave no
// answers and issue uncorroborated.
func TestPerspectivesTarget(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries and starts Hallmark on PostgreSQL")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	admin := envOr("HALLMARK_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
	if c, err := pgx.Connect(ctx, admin); err != nil {
		t.Skipf("SKIPPING: PostgreSQL unreachable at %s (%v); set HALLMARK_TEST_POSTGRES_URL", maskedURL(admin), err)
	} else {
		c.Close(ctx)
	}
	bin := t.TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin+string(filepath.Separator),
		"github.com/hallmark-ca/hallmark/cmd/hallmark", "github.com/hallmark-ca/hallmark/cmd/hallmark-frontend", "github.com/hallmark-ca/hallmark/cmd/hallmark-worker")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the binaries: %v\n%s", err, out)
	}
	resp, err := startResponders("127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Close()
	env := &benchEnv{BinDir: bin, PostgresURL: admin, WorkDir: t.TempDir(), Resp: resp, HTTPPort: resp.HTTPPort,
		Log: io.Discard, RetryAfterSeconds: 1, VerdictWaitMS: -1, Perspectives: 2}
	tg, err := env.start(ctx, "hallmark-postgres-persp")
	if err != nil {
		t.Fatal(err)
	}
	defer tg.stop()
	if n := len(tg.Procs.pids["perspectives"]); n != 2 {
		t.Fatalf("the target measures %d perspective processes, want 2", n)
	}
	r, err := runLoad(ctx, loadSpec{Directory: tg.Directory, Roots: tg.Roots, Concurrency: 2, Count: 4,
		Timeout: time.Minute, Stall: 30 * time.Second, Poll: 5 * time.Millisecond, Responders: resp, Procs: tg.Procs})
	if err != nil {
		t.Fatal(err)
	}
	if r.OK != 4 || len(r.Errors) != 0 {
		r.print(os.Stderr)
		t.Fatalf("issued %d of 4, errors %v", r.OK, r.Errors)
	}
	conn, err := pgx.Connect(ctx, tg.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	got := map[string]int{}
	rows, err := conn.Query(ctx, `SELECT perspective, count(*) FROM perspective_answers WHERE outcome = 'valid' GROUP BY perspective`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var p string
		var n int
		if err := rows.Scan(&p, &n); err != nil {
			t.Fatal(err)
		}
		got[p] = n
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	for _, p := range []string{"primary", "p1", "p2"} {
		if got[p] != 4 {
			t.Errorf("%s answered valid for %d challenges, want 4 (all answers: %v)", p, got[p], got)
		}
	}
	var valid, corroborated int
	if err := conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE corroborated) FROM authorizations WHERE status = 'valid'`).Scan(&valid, &corroborated); err != nil {
		t.Fatal(err)
	}
	if valid != 4 || corroborated != 4 {
		t.Errorf("%d valid authorizations, %d corroborated; want 4 of 4", valid, corroborated)
	}
}
