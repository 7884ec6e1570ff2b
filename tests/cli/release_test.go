package cli

import (
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// TestMigrateRecordsRelease: `hallmark migrate` records the release that
// ran it in the database, and `hallmark migrate status` names it, with the
// version, commit and build date `hallmark version` prints, on both stores.
func TestMigrateRecordsRelease(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			url := testdb.SQLite(t)
			if kind == "postgres" {
				url = testdb.Postgres(t)
			}
			c := newCA(t, url)
			if r := c.want(0, "migrate", "status"); strings.Contains(r.stdout, "migrated by") {
				t.Errorf("status names a release before any binary migrated:\n%s", r.stdout)
			}
			c.want(0, "migrate")
			// "hallmark VERSION (commit C, built D, goX)"
			v := strings.TrimSpace(c.want(0, "version").stdout)
			fields := strings.Fields(strings.NewReplacer("(", "", ")", "", ",", "").Replace(v))
			if len(fields) != 7 || fields[0] != "hallmark" || fields[2] != "commit" || fields[4] != "built" {
				t.Fatalf("hallmark version printed %q, want \"hallmark VERSION (commit C, built D, goX)\"", v)
			}
			want := "migrated by hallmark " + fields[1] + " (commit " + fields[3] + ", built " + fields[5] + ")"
			if r := c.want(0, "migrate", "status"); !strings.Contains(r.stdout, want) {
				t.Errorf("migrate status does not say %q:\n%s", want, r.stdout)
			}
		})
	}
}
