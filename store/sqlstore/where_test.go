package sqlstore

import (
	"slices"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// TestListStatements: each list's statement names only the filters that
// are set, numbers their placeholders in order before the page's bound
// and limit, and pins a filter to its index only when it is the list's
// one indexed filter.
func TestListStatements(t *testing.T) {
	t.Parallel()
	yes := true
	soon := time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)
	const orders = `SELECT ` + orderCols + ` FROM orders` + "\n"
	const certs = `SELECT ` + certCols + ` FROM certificates` + "\n"
	for _, tc := range []struct {
		name  string
		build func() (string, []any)
		sql   string
		args  []any
	}{
		{"orders, no filter", func() (string, []any) { return ordersListSQL(store.OrderFilter{}) },
			orders + "WHERE seq < $1\nORDER BY seq DESC LIMIT (SELECT CAST($2 AS bigint))", nil},
		{"orders by account alone: pinned", func() (string, []any) { return ordersListSQL(store.OrderFilter{AccountID: "a"}) },
			orders + "WHERE {pin:account_id:$1}\n  AND seq < $2\nORDER BY account_id DESC, seq DESC LIMIT (SELECT CAST($3 AS bigint))", []any{"a"}},
		{"orders by status alone: pinned", func() (string, []any) { return ordersListSQL(store.OrderFilter{Status: acme.StatusValid}) },
			orders + "WHERE {pin:status:$1}\n  AND seq < $2\nORDER BY status DESC, seq DESC LIMIT (SELECT CAST($3 AS bigint))", []any{"valid"}},
		{"orders by account and status: the planner chooses", func() (string, []any) {
			return ordersListSQL(store.OrderFilter{AccountID: "a", Status: acme.StatusValid})
		}, orders + "WHERE account_id = $1\n  AND status = $2\n  AND seq < $3\nORDER BY seq DESC LIMIT (SELECT CAST($4 AS bigint))", []any{"a", "valid"}},
		{"orders by account and identifier", func() (string, []any) {
			return ordersListSQL(store.OrderFilter{AccountID: "a", Identifier: "x.test"})
		}, orders + "WHERE account_id = $1\n  AND id {inlist} SELECT order_id FROM order_identifiers WHERE value = $2 {endlist}\n  AND seq < $3\nORDER BY seq DESC LIMIT (SELECT CAST($4 AS bigint))", []any{"a", "x.test"}},
		{"certificates revoked, expiring", func() (string, []any) {
			return certificatesListSQL(Postgres, store.CertFilter{ExpiringBefore: &soon, Revoked: &yes})
		}, certs + "WHERE not_after < $1\n  AND revoked_at IS NOT NULL\n  AND seq < $2\nORDER BY seq DESC LIMIT (SELECT CAST($3 AS bigint))", []any{soon}},
		{"certificates by account alone: pinned", func() (string, []any) { return certificatesListSQL(Postgres, store.CertFilter{AccountID: "a"}) },
			certs + "WHERE {pin:account_id:$1}\n  AND seq < $2\nORDER BY account_id DESC, seq DESC LIMIT (SELECT CAST($3 AS bigint))", []any{"a"}},
		{"jobs by kind and state", func() (string, []any) { return jobIDsSQL(store.JobFilter{Kind: "k", State: "available"}) },
			"SELECT id FROM river_job\nWHERE kind = $1\n  AND state = $2\n  AND id < $3\nORDER BY id DESC LIMIT (SELECT CAST($4 AS bigint))", []any{"k", "available"}},
		{"renewal move by issuer and account", func() (string, []any) {
			return movableSQL(store.RenewalSelector{IssuerID: "i", AccountID: "a"})
		}, "SELECT serial FROM certificates\nWHERE issuer_id = $1\n  AND {pin:account_id:$2}\n  AND revoked_at IS NULL\n  AND not_after > {now}\nORDER BY serial", []any{"i", "a"}},
	} {
		q, args := tc.build()
		if q != tc.sql {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, q, tc.sql)
		}
		if !slices.Equal(args, tc.args) {
			t.Errorf("%s: arguments %v, want %v", tc.name, args, tc.args)
		}
	}
}
