package sqlstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/store/sqlstore"
)

// TestPlansMadeSmall: a connection keeps a prepared statement's generic
// plan from the tables' size when it made it until something invalidates
// it (an ANALYZE, which autovacuum may not run for a long while). A fresh
// CA makes its plans on nearly empty tables and keeps them for the
// connection's lifetime; those plans must still read by key once the
// tables hold a fleet's rows, or not be kept (fleetCase.custom). Each
// statement is planned on a database holding a few dozen rows
// (smallBase), then run again once it holds the fleet's.
func TestPlansMadeSmall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := migrated(t)
	cases := append(fleetCases(), verdictFleetCases()...)
	// The fleet's seed alters tables (autovacuum off), which would
	// invalidate the plans: those statements go first.
	alters, rows := splitAlters(append(append(append([]string{}, fleetBase...), fleetJobs...), fleetShape...))
	execAll(t, conn, alters...)
	execAll(t, conn, smallBase...)
	execAll(t, conn, "SET plan_cache_mode = force_generic_plan")
	execute := func(i int, tc fleetCase, prefix string) string {
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if tc.custom {
			if _, err := tx.Exec(ctx, sqlstore.CustomPlansSQL(sqlstore.Postgres)); err != nil {
				t.Fatal(err)
			}
		}
		q := fmt.Sprintf("%sEXECUTE small%d", prefix, i)
		if lits := literals(t, tc.args); len(lits) > 0 {
			q += "(" + strings.Join(lits, ", ") + ")"
		}
		rows, err := tx.Query(ctx, q)
		if err != nil {
			t.Fatalf("%s: %s: %v", tc.name, q, err)
		}
		var b strings.Builder
		for rows.Next() {
			if prefix == "" {
				continue
			}
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			b.WriteString(line + "\n")
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %s: %v", tc.name, q, err)
		}
		return b.String()
	}
	for i, tc := range cases {
		execAll(t, conn, fmt.Sprintf("PREPARE small%d AS %s", i, tc.q))
		execute(i, tc, "") // the generic plan, made on small tables
	}
	execAll(t, conn, smallGone...) // DELETE: a TRUNCATE would invalidate the plans
	execAll(t, conn, rows...)
	for i, tc := range cases {
		p := execute(i, tc, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ")
		t.Logf("%s: %s", tc.name, planSummary(p))
		if what := readsTooMuch(p, "orders", "authorizations", "challenges", "order_authz", "certificates", "river_job"); what != "" {
			t.Errorf("%s, planned on small tables, reads %s:\n%s", tc.name, what, p)
		}
	}
}

// verdictFleetCases are the verdict's statements on a fleet's database
// (fleetBase): cp2000_0 is a challenge of pending p2000, whose order is
// po2000.
func verdictFleetCases() []fleetCase {
	var out []fleetCase
	for name, q := range sqlstore.OrderFindingSQL(sqlstore.Postgres) {
		args := []any{"cp2000_0"}
		if strings.HasPrefix(name, "deactivate") {
			args = []any{"p2000"}
		}
		if strings.Contains(q, "$2") {
			args = append(args, `{"type":"urn:ietf:params:acme:error:unauthorized"}`)
		}
		// Deactivation plans afresh (AuthzDeactivate); a verdict runs on
		// every issuance and keeps its plans.
		out = append(out, fleetCase{name: name, q: q, args: args, custom: strings.HasPrefix(name, "deactivate")})
	}
	return out
}

// smallBase is a new CA's first few dozen issuances, deleted
// (smallGone) before the fleet (fleetBase) grows: account "new", its authorizations n_a1..n_a40
// valid, orders n_o1..n_o40 valid with certificates n_s1..n_s40.
var smallBase = []string{
	`INSERT INTO accounts (id, key_jwk, thumbprint, status) VALUES ('new', '{}', 'tpn', 'valid')`,
	`INSERT INTO authorizations (id, account_id, identifier_type, identifier_value, status, expires_at)
	 SELECT 'n_a'||g, 'new', 'dns', 'n'||g||'.new.test', 'valid', now() + interval '30 days' FROM generate_series(1, 40) g`,
	`INSERT INTO challenges (id, authz_id, position, type, token, status, validated_at)
	 SELECT 'c'||a.id||'_'||p, a.id, p, CASE p WHEN 0 THEN 'http-01' ELSE 'dns-01' END, 'tok', CASE p WHEN 0 THEN 'valid' ELSE 'pending' END, now()
	 FROM authorizations a, generate_series(0, 1) p WHERE a.account_id = 'new'`,
	`INSERT INTO orders (id, account_id, status, identifiers, profile, expires_at, cert_serial)
	 SELECT 'n_o'||g, 'new', 'valid', '[]', 'default', now() + interval '7 days', 'n_s'||g FROM generate_series(1, 40) g`,
	`INSERT INTO order_authz SELECT 'n_o'||g, 'n_a'||g, 0 FROM generate_series(1, 40) g`,
	`INSERT INTO certificates (serial, order_id, account_id, issuer_id, profile, der, chain_pem, names, not_before, not_after, issued_at)
	 SELECT 'n_s'||g, 'n_o'||g, 'new', 'i', 'default', '\x', '\x', '[]', now(), now() + interval '90 days', now() FROM generate_series(1, 40) g`,
}

// smallGone deletes smallBase's rows.
var smallGone = []string{
	`DELETE FROM certificates WHERE account_id = 'new'`,
	`DELETE FROM order_authz WHERE order_id LIKE 'n\_o%'`,
	`DELETE FROM orders WHERE account_id = 'new'`,
	`DELETE FROM challenges WHERE authz_id LIKE 'n\_a%'`,
	`DELETE FROM authorizations WHERE account_id = 'new'`,
	`DELETE FROM accounts WHERE id = 'new'`,
}

// splitAlters parts seed statements into those that alter a table and
// the rest, each in their order.
func splitAlters(seed []string) (alters, rows []string) {
	for _, q := range seed {
		if strings.Contains(q, "ALTER TABLE") {
			alters = append(alters, q)
		} else {
			rows = append(rows, q)
		}
	}
	return alters, rows
}
