package postgres_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/store/postgres"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// TestAdvice: the settings that lose certificates on a crash, or slow
// issuance as the tables grow, are named; a database set up as PostgreSQL
// ships is given none of the per-session or per-table ones. The server-wide
// autovacuum switch is read from the server itself, since the test cannot
// change it for the other tests sharing the server.
func TestAdvice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := testdb.Postgres(t)
	db, err := open.Open(ctx, base, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	admin, err := postgres.Connect(ctx, base, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var autovacuum string
	if err := admin.QueryRow(ctx, `SHOW autovacuum`).Scan(&autovacuum); err != nil {
		t.Fatal(err)
	}

	// pgx sends a URL parameter it does not know as a session setting.
	withSetting := func(name, value string) string {
		u, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set(name, value)
		u.RawQuery = q.Encode()
		return u.String()
	}
	for _, tc := range []struct {
		name   string
		url    string
		setup  string // run on the test's database first
		want   []string
		reject []string
	}{
		{name: "as shipped", url: base, reject: []string{"synchronous_commit", "autovacuum is off for"}},
		{name: "asynchronous commit", url: withSetting("synchronous_commit", "off"), want: []string{"synchronous_commit = off"}},
		{name: "local commit is durable", url: withSetting("synchronous_commit", "local"), reject: []string{"synchronous_commit"}},
		{name: "a table left in explicitly", url: base, setup: `ALTER TABLE river_job SET (autovacuum_enabled = yes)`,
			reject: []string{"autovacuum is off for"}},
		{name: "a table left out", url: base, setup: `ALTER TABLE river_job SET (autovacuum_enabled = off); ALTER TABLE orders SET (autovacuum_enabled = false)`,
			want: []string{"orders, river_job"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != "" {
				if _, err := admin.Exec(ctx, tc.setup); err != nil {
					t.Fatal(err)
				}
				defer admin.Exec(ctx, `ALTER TABLE river_job RESET (autovacuum_enabled); ALTER TABLE orders RESET (autovacuum_enabled)`) //nolint:errcheck
			}
			pool, err := postgres.Connect(ctx, tc.url, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			advice, err := postgres.Advice(ctx, pool)
			if err != nil {
				t.Fatal(err)
			}
			all := strings.Join(advice, "\n")
			want, reject := tc.want, tc.reject
			if autovacuum == "off" {
				want = append(want, "autovacuum is off:")
			} else {
				reject = append(reject, "autovacuum is off:")
			}
			for _, w := range want {
				if !strings.Contains(all, w) {
					t.Errorf("advice does not say %q:\n%s", w, all)
				}
			}
			for _, r := range reject {
				if strings.Contains(all, r) {
					t.Errorf("advice says %q:\n%s", r, all)
				}
			}
		})
	}
}
