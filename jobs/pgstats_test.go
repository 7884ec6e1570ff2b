package jobs_test

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgStats reads pg_stat_statements for one test database, so a benchmark
// can say how much PostgreSQL work its jobs cost. The extension is
// cluster-wide and other work shares the server: every read and reset is
// filtered by the test database's oid. A server without the extension (or a
// role that may not create it) gives a nil *pgStats and no metrics.
type pgStats struct {
	db pgDB
}

func newPGStats(tb testing.TB, db sqlDB) *pgStats {
	tb.Helper()
	pg, ok := db.(pgDB)
	if !ok {
		return nil
	}
	if err := pg.Exec(context.Background(), "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		tb.Logf("no pg_stat_statements (%v): statement metrics skipped", err)
		return nil
	}
	// The extension can be created on a server that does not load it
	// (shared_preload_libraries); reading it then fails.
	if err := pg.Exec(context.Background(), "SELECT 1 FROM pg_stat_statements LIMIT 1"); err != nil {
		tb.Logf("pg_stat_statements is not loaded (%v): statement metrics skipped", err)
		return nil
	}
	return &pgStats{pg}
}

// reset forgets this database's statements.
func (s *pgStats) reset(tb testing.TB) {
	tb.Helper()
	if s == nil {
		return
	}
	if err := s.db.Exec(context.Background(),
		"SELECT pg_stat_statements_reset(0, oid, 0) FROM pg_database WHERE datname = current_database()"); err != nil {
		tb.Fatalf("resetting pg_stat_statements: %v", err)
	}
}

// stmt is one statement's totals since the last reset.
type stmt struct {
	name  string
	calls int64
	exec  time.Duration
}

// sqlcName finds River's sqlc query name ("-- name: JobGetAvailable :many").
var sqlcName = regexp.MustCompile(`-- name: (\w+)`)

// read returns this database's statements, most expensive first, leaving
// out its own reads and the benchmarks' bookkeeping (marked /* bench */).
func (s *pgStats) read(tb testing.TB) []stmt {
	tb.Helper()
	if s == nil {
		return nil
	}
	rows, err := s.db.pool.Query(context.Background(), `
SELECT query, calls, total_exec_time FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND query NOT LIKE '%pg_stat_statements%' AND query NOT LIKE '%/* bench */%'`)
	if err != nil {
		tb.Fatalf("reading pg_stat_statements: %v", err)
	}
	byName := map[string]*stmt{}
	var (
		q     string
		calls int64
		ms    float64
	)
	_, err = pgx.ForEachRow(rows, []any{&q, &calls, &ms}, func() error {
		name := q
		if m := sqlcName.FindStringSubmatch(q); m != nil {
			name = m[1]
		} else if len(name) > 70 {
			name = name[:70]
		}
		st := byName[name]
		if st == nil {
			st = &stmt{name: name}
			byName[name] = st
		}
		st.calls += calls
		st.exec += time.Duration(ms * float64(time.Millisecond))
		return nil
	})
	if err != nil {
		tb.Fatalf("reading pg_stat_statements: %v", err)
	}
	out := make([]stmt, 0, len(byName))
	for _, st := range byName {
		out = append(out, *st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].exec > out[j].exec })
	return out
}

// report adds stmts/<per> and db-ms/<per> (statements and their execution
// time divided by n) and, under -v, prints the statements to w.
func report(b *testing.B, stmts []stmt, n float64, per string, w io.Writer) {
	if stmts == nil {
		return
	}
	var calls int64
	var exec time.Duration
	for _, st := range stmts {
		calls += st.calls
		exec += st.exec
	}
	b.ReportMetric(float64(calls)/n, "stmts/"+per)
	if exec > 0 { // SQLite's counts have no execution time
		b.ReportMetric(float64(exec)/float64(time.Millisecond)/n, "db-ms/"+per)
	}
	if testing.Verbose() {
		fmt.Fprintf(w, "%s: %d statements, %.1f ms\n", b.Name(), calls, float64(exec)/float64(time.Millisecond))
		for _, st := range stmts {
			fmt.Fprintf(w, "  %7d calls %9.1f ms %7.3f ms/call  %s\n", st.calls, float64(st.exec)/float64(time.Millisecond),
				float64(st.exec)/float64(time.Millisecond)/float64(st.calls), st.name)
		}
	}
}
