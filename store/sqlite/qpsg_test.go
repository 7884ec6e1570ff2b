package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riversqlite"

	"github.com/hallmark-ca/hallmark/jobs"
)

// withoutQPSG is Hallmark's driver with the statement cache and without
// the query planner stability guarantee: what it was before round 25.
const withoutQPSG = driverName + "-without-qpsg"

var registerWithoutQPSG sync.Once

// openWith opens a file database through the named driver, on one
// connection, as Open does.
func openWith(t testing.TB, name string) *sql.DB {
	t.Helper()
	registerWithoutQPSG.Do(func() { sql.Register(withoutQPSG, cachingDriver{inner: moderncDriver}) })
	db, err := sql.Open(name, DSN(filepath.Join(t.TempDir(), "qpsg.db")))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

// TestQPSG: Hallmark's connections plan a statement without looking at the
// values bound to it. What shows it from outside is the one plan SQLite
// otherwise bases on a bound value that this test can see: a LIKE with a
// bound pattern on a NOCASE index is a range search of the index when the
// planner reads the pattern ("ab%"), and a scan when it may not. The same
// connection without the guarantee searches, so the test fails where
// enableQPSG stopped working (a modernc upgrade).
func TestQPSG(t *testing.T) {
	for _, c := range []struct {
		driver string
		want   string // in EXPLAIN QUERY PLAN's detail
	}{
		{driverName, "SCAN t"},
		{withoutQPSG, "SEARCH t USING COVERING INDEX t_x"},
	} {
		t.Run(c.driver, func(t *testing.T) {
			ctx := context.Background()
			db := openWith(t, c.driver)
			if _, err := db.ExecContext(ctx, "CREATE TABLE t (x TEXT COLLATE NOCASE); CREATE INDEX t_x ON t (x)"); err != nil {
				t.Fatal(err)
			}
			rows, err := db.QueryContext(ctx, "EXPLAIN QUERY PLAN SELECT x FROM t WHERE x LIKE ?1", "ab%")
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var plan []string
			for rows.Next() {
				var id, parent, unused int
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, detail)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(plan, "; "); !strings.Contains(got, c.want) {
				t.Errorf("plan %q, want %q in it", got, c.want)
			}
		})
	}
}

// BenchmarkRebindLimit: River's job fetch (JobGetAvailable) against an
// empty queue, as a worker polls it, with the LIMIT it binds (the room its
// queue has) the same every time or changing, through Hallmark's driver and
// through the same driver without the query planner stability guarantee.
// Without it a changed LIMIT makes SQLite parse and plan the cached
// statement again.
//
//	go test ./store/sqlite -run '^$' -bench RebindLimit
func BenchmarkRebindLimit(b *testing.B) {
	for _, d := range []string{driverName, withoutQPSG} {
		for _, changing := range []bool{false, true} {
			name := d + "/same"
			if changing {
				name = d + "/changing"
			}
			b.Run(name, func(b *testing.B) {
				ctx := context.Background()
				db := openWith(b, d)
				if err := jobs.NewSQLite(db).Migrate(ctx); err != nil {
					b.Fatal(err)
				}
				exec := riversqlite.New(db).GetExecutor()
				for i := 0; b.Loop(); i++ {
					room := 8
					if changing {
						room = 1 + i%8
					}
					now := time.Now()
					if _, err := exec.JobGetAvailable(ctx, &riverdriver.JobGetAvailableParams{
						ClientID: "bench", MaxAttemptedBy: 100, MaxToLock: room, Queue: "validate", Now: &now,
					}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
