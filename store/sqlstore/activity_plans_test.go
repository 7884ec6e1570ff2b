package sqlstore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hallmark-ca/hallmark/store/sqlstore"
)

// TestActivityPlans: the overview's hourly counts read only the last day's
// rows of a month's certificates, validated challenges, audit events and
// finalized River jobs (20,000 of each, a day's share about 670), each
// through the index on the time it counts by.
func TestActivityPlans(t *testing.T) {
	planCases(t, func(t *testing.T, conn *pgx.Conn, generic bool) {
		end := time.Now().UTC().Truncate(time.Hour).Add(time.Hour)
		for _, q := range sqlstore.ActivitySQL(sqlstore.Postgres, end.Add(-24*time.Hour), end) {
			plan := explain(t, conn, generic, q[0].(string), q[1:]...)
			if why := readsTooMuch(plan, "certificates", "challenges", "audit_events", "river_job"); why != "" {
				t.Errorf("generic=%v: %s reads too much: %s\n%s", generic, strings.SplitN(q[0].(string), "\n", 2)[0], why, plan)
			}
		}
	})
}
