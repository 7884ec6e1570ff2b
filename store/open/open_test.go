package open_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/store/sqlite"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// TestOpenMigrate: the binaries' path — Migrate a URL, Open it, use the
// store, see the status — for both dialects.
func TestOpenMigrate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		dialect string
		url     func(t *testing.T) string
	}{
		{"postgres", func(t *testing.T) string { return testdb.Postgres(t) }},
		{"sqlite", func(t *testing.T) string {
			// A directory that does not exist yet: Open creates it.
			return "sqlite:" + filepath.Join(t.TempDir(), "new", "dir", "hallmark.db")
		}},
	} {
		t.Run(tc.dialect, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			url := tc.url(t)
			st, err := open.Status(ctx, url)
			if err != nil || len(st.Applied) != 0 || len(st.Pending) == 0 {
				t.Fatalf("status of an empty database = %+v, %v; want everything pending", st, err)
			}
			start := time.Now()
			if err := open.Migrate(ctx, url); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: migrations took %v", tc.dialect, time.Since(start))
			db, err := open.Open(ctx, url, 4)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if db.Dialect != tc.dialect {
				t.Fatalf("Dialect = %q, want %q", db.Dialect, tc.dialect)
			}
			st, err = db.MigrationStatus(ctx)
			if err != nil || len(st.Pending) != 0 || st.Current() != st.Latest {
				t.Fatalf("status after Migrate = %+v, %v", st, err)
			}
			if _, err := db.Store.NonceKey(ctx); err != nil {
				t.Fatalf("using the store: %v", err)
			}
		})
	}
}

func TestOpenRefusesNewerDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.SQLite(t)
	if err := open.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	db, err := open.Open(ctx, url, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Store.AuditRecord(ctx, store.AuditEvent{Actor: "test", Action: "noop"}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	// A newer Hallmark has migrated this database.
	raw, err := sqlite.Open(strings.TrimPrefix(url, "sqlite:"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec("INSERT INTO schema_migrations (version, name) VALUES (9999, 'future')"); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	if _, err := open.Open(ctx, url, 0); !errors.Is(err, store.ErrTooNew) {
		t.Fatalf("Open of a newer database: %v, want store.ErrTooNew", err)
	}
	if err := open.Migrate(ctx, url); !errors.Is(err, store.ErrTooNew) {
		t.Fatalf("Migrate of a newer database: %v, want store.ErrTooNew", err)
	}
	if st, err := open.Status(ctx, url); !errors.Is(err, store.ErrTooNew) || st.Current() != 9999 {
		t.Fatalf("Status of a newer database = %+v, %v", st, err)
	}
}

func TestOpenRejectsUnknownURL(t *testing.T) {
	t.Parallel()
	for _, url := range []string{"mysql://root:secret@localhost/db", "sqlite:", "/tmp/x.db"} {
		if _, err := open.Open(context.Background(), url, 0); err == nil {
			t.Errorf("Open(%q) succeeded", url)
		} else if url == "mysql://root:secret@localhost/db" && strings.Contains(err.Error(), "secret") {
			t.Errorf("the error %q shows the password", err)
		}
	}
}
