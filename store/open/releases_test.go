package open_test

import (
	"context"
	"testing"

	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// TestRecordRelease: the database remembers which release migrated it
// (migration 15), on both stores. Migrating again with the same release
// adds nothing; another release adds a row, and the status names the
// newest. A database never migrated by a recording binary names none.
func TestRecordRelease(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testdb.Open(t, kind)
			st, err := db.MigrationStatus(ctx)
			if err != nil || st.MigratedBy != nil {
				t.Fatalf("status of a database no release recorded itself in: %+v, %v", st.MigratedBy, err)
			}
			v1 := open.Release{Version: "v1.0.0", Commit: "0123456789abcdef0123456789abcdef01234567", Built: "2026-01-02T03:04:05Z"}
			v2 := open.Release{Version: "v1.1.0-2-gfedcba9-dirty", Commit: "fedcba9876543210fedcba9876543210fedcba98", Built: "2026-02-03T04:05:06Z"}
			for i, step := range []struct {
				rel  open.Release
				want bool
			}{{v1, true}, {v1, false}, {v2, true}, {v2, false}, {v1, true}} {
				added, err := db.RecordRelease(ctx, step.rel)
				if err != nil || added != step.want {
					t.Fatalf("step %d: RecordRelease(%s) = %v, %v; want %v", i, step.rel.Version, added, err, step.want)
				}
				st, err := db.MigrationStatus(ctx)
				if err != nil || st.MigratedBy == nil {
					t.Fatalf("step %d: status %+v, %v", i, st, err)
				}
				if got := st.MigratedBy; got.Release != step.rel || got.Schema != st.Current() || got.MigratedAt.IsZero() {
					t.Errorf("step %d: migrated by %+v, want %+v at schema %d", i, got, step.rel, st.Current())
				}
			}
		})
	}
}
