// Package testdb gives tests a real database of their own: a fresh
// PostgreSQL database per call (dropped at cleanup) or a SQLite file in the
// test's temporary directory. Without PostgreSQL a test skips loudly, except
// in CI (CI=true) or with HALLMARK_REQUIRE_POSTGRES=1, where it fails: a green
// CI must never hide a missing database.
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/store/redact"
)

// DefaultPostgresURL is the machine's local PostgreSQL (trust auth).
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// Required reports whether missing infrastructure must fail tests rather
// than skip them.
func Required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("HALLMARK_REQUIRE_POSTGRES") == "1"
}

// Postgres creates a new, empty database and returns its URL. It is dropped
// when the test ends.
func Postgres(t testing.TB) string {
	t.Helper()
	admin := os.Getenv("HALLMARK_TEST_POSTGRES_URL")
	if admin == "" {
		admin = DefaultPostgresURL
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		if Required() {
			t.Fatalf("PostgreSQL is required here (CI) but unreachable at %s: %v", redact.URL(admin), err)
		}
		t.Skipf("SKIPPING: PostgreSQL unreachable at %s (%v); set HALLMARK_TEST_POSTGRES_URL or start PostgreSQL to run this test", redact.URL(admin), err)
	}
	defer conn.Close(ctx)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "hallmark_test_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("creating test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("parsing %s: %v", redact.URL(admin), err)
	}
	u.Path = "/" + name
	return u.String()
}

// SQLite returns a "sqlite:<path>" URL for a new database file in the test's
// temporary directory.
func SQLite(t testing.TB) string {
	t.Helper()
	return "sqlite:" + filepath.Join(t.TempDir(), fmt.Sprintf("hallmark-%d.db", time.Now().UnixNano()))
}

// Open returns a migrated store on a fresh database of the dialect
// ("sqlite" or "postgres"), closed when the test ends. It is what handler,
// worker and benchmark tests need: the real store and queue, nothing faked.
func Open(tb testing.TB, dialect string) *open.DB {
	tb.Helper()
	url := SQLite(tb)
	if dialect == "postgres" {
		url = Postgres(tb)
	}
	return OpenURL(tb, url)
}

// OpenURL is Open on a fresh database the caller made (SQLite or
// Postgres), for a test that also reaches into it with SQL of its own.
func OpenURL(tb testing.TB, url string) *open.DB {
	tb.Helper()
	dialect := "sqlite"
	if !strings.HasPrefix(url, "sqlite:") {
		dialect = "postgres"
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := open.Migrate(ctx, url); err != nil {
		tb.Fatalf("migrating %s: %v", dialect, err)
	}
	db, err := open.Open(ctx, url, 4)
	if err != nil {
		tb.Fatalf("opening %s: %v", dialect, err)
	}
	tb.Cleanup(db.Close)
	return db
}
