package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	msqlite "modernc.org/sqlite"

	"github.com/hallmark-ca/hallmark/jobs"
)

func TestOpaqueLimits(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"SELECT x FROM t LIMIT ?1", "SELECT x FROM t LIMIT +?1"},
		{"select x from t limit\n\t@n offset ?2", "select x from t limit\n\t+@n offset ?2"},
		{"SELECT x FROM t WHERE id IN (SELECT id FROM t LIMIT :max) LIMIT $m", "SELECT x FROM t WHERE id IN (SELECT id FROM t LIMIT +:max) LIMIT +$m"},
		{"SELECT x FROM t LIMIT 5", "SELECT x FROM t LIMIT 5"},
		{"SELECT x FROM t LIMIT +?1", "SELECT x FROM t LIMIT +?1"},
		{"SELECT 'LIMIT ?1', \"limit ?2\", [LIMIT ?3] -- LIMIT ?4\n/* LIMIT ?5 */", "SELECT 'LIMIT ?1', \"limit ?2\", [LIMIT ?3] -- LIMIT ?4\n/* LIMIT ?5 */"},
		{"SELECT 'it''s' FROM unlimited WHERE nolimit = ?1", "SELECT 'it''s' FROM unlimited WHERE nolimit = ?1"},
		{"SELECT x FROM t LIMIT", "SELECT x FROM t LIMIT"},
	} {
		if got := opaqueLimits(c.in); got != c.want {
			t.Errorf("opaqueLimits(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// planningLimits is Hallmark's driver with the statement cache and the
// statements prepared as written, bound LIMITs planned with their values.
const planningLimits = driverName + "-planning-limits"

var registerPlanningLimits sync.Once

// openWith opens a file database through the named driver, on one
// connection, as Open does.
func openWith(t testing.TB, name string) *sql.DB {
	t.Helper()
	registerPlanningLimits.Do(func() { sql.Register(planningLimits, cachingDriver{inner: moderncDriver}) })
	db, err := sql.Open(name, DSN(filepath.Join(t.TempDir(), "limit.db")))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

// riverFetch opens a River schema through the named driver and returns
// River's job fetch (JobGetAvailable) against its empty validate queue, a
// worker's poll, taking room jobs.
func riverFetch(t testing.TB, name string) (*sql.DB, func(room int)) {
	ctx := context.Background()
	db := openWith(t, name)
	if err := jobs.NewSQLite(db).Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	exec := riversqlite.New(db).GetExecutor()
	return db, func(room int) {
		now := time.Now()
		if _, err := exec.JobGetAvailable(ctx, &riverdriver.JobGetAvailableParams{
			ClientID: "test", MaxAttemptedBy: 100, MaxToLock: room, Queue: "validate", Now: &now,
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLimitNotReplanned: River's job fetch, its cached statement bound a
// different LIMIT each time, is compiled once. SQLite calls a connection's
// authorizer for each statement it compiles, a statement compiled again
// after a new binding included; River's fetch is the one that updates
// river_job. The same driver preparing the statement as written compiles
// it again at every new LIMIT, so the test fails where SQLite starts
// planning with the value behind "LIMIT +?N".
func TestLimitNotReplanned(t *testing.T) {
	for _, c := range []struct {
		driver    string
		recompile bool
	}{
		{driverName, false},
		{planningLimits, true},
	} {
		t.Run(c.driver, func(t *testing.T) {
			db, fetch := riverFetch(t, c.driver)
			fetch(8) // compiled and cached
			var compiled atomic.Int64
			authorize(t, db, func(action msqlite.AuthorizerActionCode, table, _, _, _ string) msqlite.AuthorizerReturnCode {
				if action == msqlite.AuthUpdate && table == "river_job" {
					compiled.Add(1)
				}
				return msqlite.AuthorizerOK
			})
			fetch(8) // compiled again: installing an authorizer expires statements
			compiled.Store(0)
			for room := 1; room <= 8; room++ {
				fetch(room)
			}
			if got := compiled.Load() > 0; got != c.recompile {
				t.Errorf("River's fetch compiled again at a new LIMIT: %v (%d authorizations), want %v", got, compiled.Load(), c.recompile)
			}
		})
	}
}

// authorize installs fn as the authorizer of db's one connection.
func authorize(t *testing.T, db *sql.DB, fn msqlite.AuthorizerFn) {
	t.Helper()
	sc, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	if err := sc.Raw(func(dc any) error {
		cc, ok := dc.(*cachingConn)
		if !ok {
			return fmt.Errorf("connection %T is not the caching driver's", dc)
		}
		ar, ok := cc.innerConn.(msqlite.AuthorizerRegisterer)
		if !ok {
			return fmt.Errorf("modernc's connection %T has no authorizer", cc.innerConn)
		}
		return ar.RegisterAuthorizer(fn)
	}); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkRebindLimit: River's job fetch against an empty queue, as a
// worker polls it, with the LIMIT it binds (the room its queue has) the
// same every time or changing, through Hallmark's driver and through the
// same driver preparing the statement as written.
//
//	go test ./store/sqlite -run '^$' -bench RebindLimit
func BenchmarkRebindLimit(b *testing.B) {
	for _, d := range []string{driverName, planningLimits} {
		for _, changing := range []bool{false, true} {
			name := d + "/same"
			if changing {
				name = d + "/changing"
			}
			b.Run(name, func(b *testing.B) {
				_, fetch := riverFetch(b, d)
				for i := 0; b.Loop(); i++ {
					room := 8
					if changing {
						room = 1 + i%8
					}
					fetch(room)
				}
			})
		}
	}
}
