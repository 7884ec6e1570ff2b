package sqlstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/sqlstore"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// The plan tests run the store's own statements (exported for the tests in
// export_test.go) under EXPLAIN ANALYZE on a freshly migrated PostgreSQL
// database holding 20,000 pending orders and 20,000 certificates. Nothing
// is ever ANALYZEd (autovacuum is off on the tables), as on a fresh
// installation or a table that grew faster than autovacuum, and each test
// checks again after ANALYZE. A plan must not read a large table to answer
// for a few rows, however the planner estimates.

// migrated is a connection to a fresh, migrated PostgreSQL database.
func migrated(t *testing.T) *pgx.Conn {
	t.Helper()
	url := testdb.Postgres(t)
	testdb.OpenURL(t, url) // migrates
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// execAll runs each of qs on conn, failing the test at the first error.
func execAll(t *testing.T, conn *pgx.Conn, qs ...string) {
	t.Helper()
	for _, q := range qs {
		if _, err := conn.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// seeded is the connection to such a database, with statistics when
// analyze.
func seeded(t *testing.T, analyze bool) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn := migrated(t)
	execAll(t, conn, []string{
		`DO $$ DECLARE t text; BEGIN FOREACH t IN ARRAY ARRAY['orders','authorizations','challenges','order_authz','certificates','certificate_names','certificate_domains','audit_events','river_job'] LOOP
		   EXECUTE format('ALTER TABLE %I SET (autovacuum_enabled = false)', t); END LOOP; END $$`,
		`INSERT INTO accounts (id, key_jwk, thumbprint, status) VALUES ('acct', '{}', 'tp', 'valid')`,
		`INSERT INTO orders (id, account_id, status, identifiers, profile, expires_at)
		 SELECT 'o'||g, 'acct', 'pending', '[]', 'default', now() + interval '1 day' FROM generate_series(1, 20000) g`,
		`INSERT INTO authorizations (id, account_id, identifier_type, identifier_value, status, expires_at)
		 SELECT 'a'||g, 'acct', 'dns', 'h'||g||'.example.com', 'pending', now() + interval '1 day' FROM generate_series(1, 20000) g`,
		`INSERT INTO order_authz SELECT 'o'||g, 'a'||g, 0 FROM generate_series(1, 20000) g`,
		`INSERT INTO challenges (id, authz_id, position, type, token, status)
		 SELECT 'c'||g||'_'||p, 'a'||g, p, 'http-01', 'tok', CASE WHEN p = 0 THEN 'processing' ELSE 'pending' END
		 FROM generate_series(1, 20000) g, generate_series(0, 1) p`,
		`INSERT INTO certificates (serial, order_id, account_id, issuer_id, profile, der, chain_pem, names, not_before, not_after, issued_at)
		 SELECT 's'||g, 'o'||g, 'acct', 'i', 'default', '\x', '\x', '[]', now(), now() + interval '90 days', now() - (g % 30) * interval '1 day'
		 FROM generate_series(1, 20000) g`,
		`INSERT INTO certificate_names SELECT 's'||g, 'h'||g||'.example'||(g % 200)||'.com' FROM generate_series(1, 20000) g`,
		// What issuance writes (queueCertificate) for those names.
		`INSERT INTO certificate_domains (domain, serial, issued_at)
		 SELECT d, c.serial, c.issued_at FROM certificates c, generate_series(1, 20000) g,
		   LATERAL (VALUES ('h'||g||'.example'||(g % 200)||'.com'), ('example'||(g % 200)||'.com')) v(d)
		 WHERE c.serial = 's'||g`,
		// A month of validations, trail events and finished jobs
		// (TestActivityPlans).
		`UPDATE challenges SET status = 'valid', validated_at = now() - (substr(authz_id, 2)::int % 30) * interval '1 day' WHERE position = 1`,
		`INSERT INTO audit_events (actor, action, subject, at, trail)
		 SELECT 'worker', CASE WHEN g % 2 = 0 THEN 'validation.failed' ELSE 'certificate.issued' END, 'c'||g, now() - (g % 30) * interval '1 day', true
		 FROM generate_series(1, 20000) g`,
		`INSERT INTO river_job (args, kind, max_attempts, state, created_at, scheduled_at, finalized_at)
		 SELECT '{}', 'crl_generate', 5, 'completed', now() - (g % 30) * interval '1 day', now() - (g % 30) * interval '1 day', now() - (g % 30) * interval '1 day'
		 FROM generate_series(1, 20000) g`,
	}...)
	if analyze {
		if _, err := conn.Exec(ctx, "ANALYZE"); err != nil {
			t.Fatal(err)
		}
	}
	return conn
}

// explain is EXPLAIN ANALYZE of q with args on conn, in a transaction
// rolled back after, as PostgreSQL plans it for these arguments (a custom
// plan) and, when generic, as it plans it for any arguments (the generic
// plan a prepared statement may switch to after five runs).
func explain(t *testing.T, conn *pgx.Conn, generic bool, q string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	const opts = "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) "
	if generic {
		if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "PREPARE planned AS "+q); err != nil {
			t.Fatalf("PREPARE %s: %v", q, err)
		}
		// A prepared statement outlives the transaction; pgx's own
		// cached statements stay.
		defer func() {
			_ = tx.Rollback(ctx)
			_, _ = conn.Exec(ctx, "DEALLOCATE planned")
		}()
		lits := literals(t, args)
		q = "EXECUTE planned"
		if len(lits) > 0 {
			q += "(" + strings.Join(lits, ", ") + ")"
		}
		args = nil
	}
	rows, err := tx.Query(ctx, opts+q, args...)
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", q, err)
	}
	var b strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		b.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("EXPLAIN %s: %v", q, err)
	}
	return b.String()
}

// literals are args written as SQL literals, for EXECUTE of a prepared
// statement.
func literals(t *testing.T, args []any) []string {
	t.Helper()
	lits := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			lits[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
		case int64:
			lits[i] = strconv.FormatInt(v, 10)
		case int:
			lits[i] = strconv.Itoa(v)
		case bool:
			lits[i] = strconv.FormatBool(v)
		case time.Time:
			lits[i] = "'" + v.Format(time.RFC3339Nano) + "'"
		case []byte:
			lits[i] = `'\x` + hex.EncodeToString(v) + "'"
		default:
			t.Fatalf("argument %d: %T", i, a)
		}
	}
	return lits
}

// scanRows is a plan node's count of the rows it read: returned them, or
// read and threw them away (an index scan whose condition is too wide, the
// rest of the WHERE applied row by row).
var scanRows = regexp.MustCompile(`(?m)^.*(?:Scan.*actual rows=(\d+)|Rows Removed by (?:Filter|Index Recheck): (\d+)).*$`)

// readsTooMuch says what in plan reads a whole large table, or a thousand
// rows or more of one, or "".
func readsTooMuch(plan string, tables ...string) string {
	return readsOver(plan, 999, tables...)
}

// readsOver says what in plan reads a whole large table, or more than most
// rows of one, or "".
func readsOver(plan string, most int, tables ...string) string {
	for _, tb := range tables {
		if strings.Contains(plan, "Seq Scan on "+tb+" ") || strings.HasSuffix(strings.TrimSpace(plan), "Seq Scan on "+tb) {
			return "a sequential scan of " + tb
		}
	}
	for _, m := range scanRows.FindAllStringSubmatch(plan, -1) {
		if n, _ := strconv.Atoi(m[1] + m[2]); n > most {
			return fmt.Sprintf("a scan reading more than %d rows: %s", most, strings.TrimSpace(m[0]))
		}
	}
	return ""
}

// planCases runs check for each of: never analyzed, analyzed; custom and
// generic plans.
func planCases(t *testing.T, check func(t *testing.T, conn *pgx.Conn, generic bool)) {
	t.Parallel()
	for _, analyze := range []bool{false, true} {
		name := "unanalyzed"
		if analyze {
			name = "analyzed"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			conn := seeded(t, analyze)
			for _, generic := range []bool{false, true} {
				check(t, conn, generic)
			}
		})
	}
}

// TestRateCertificatesPlan: counting one domain's certificates reads that
// domain's index range, not every certificate name ever stored.
func TestRateCertificatesPlan(t *testing.T) {
	planCases(t, func(t *testing.T, conn *pgx.Conn, generic bool) {
		q := sqlstore.RateCertificatesSQL(sqlstore.Postgres)
		// 100 certificates of example7.com in the window, of 20,000.
		p := explain(t, conn, generic, q, -(31 * 24 * time.Hour).Microseconds(), "example7.com")
		if !strings.Contains(p, "actual rows=100 ") {
			t.Errorf("generic=%v: the count did not find example7.com's 100 certificates:\n%s", generic, p)
		}
		t.Logf("generic=%v:\n%s", generic, p)
		if what := readsTooMuch(p, "certificates", "certificate_names", "certificate_domains"); what != "" {
			t.Errorf("generic=%v: RateCertificates reads %s:\n%s", generic, what, p)
		}
	})
}

// TestVerdictPlans: a challenge's verdict (on the issuance path) and
// AuthzDeactivate find the few orders of one authorization from its keys,
// whatever the statistics: 20,000 other pending orders are not read.
func TestVerdictPlans(t *testing.T) {
	planCases(t, func(t *testing.T, conn *pgx.Conn, generic bool) {
		// The seed's challenge c777_0 is processing; its authorization a777
		// is made valid as the verdict's own statement before would.
		if _, err := conn.Exec(context.Background(), "UPDATE authorizations SET status = 'valid' WHERE id = 'a777'"); err != nil {
			t.Fatal(err)
		}
		for name, q := range sqlstore.OrderFindingSQL(sqlstore.Postgres) {
			key := "c777_0"
			if strings.HasPrefix(name, "deactivate") {
				key = "a777"
			}
			args := []any{key}
			if strings.Contains(q, "$2") {
				args = append(args, `{"type":"urn:ietf:params:acme:error:unauthorized"}`)
			}
			p := explain(t, conn, generic, q, args...)
			t.Logf("%s, generic=%v:\n%s", name, generic, p)
			if what := readsTooMuch(p, "orders", "order_authz", "authorizations", "challenges"); what != "" {
				t.Errorf("%s (generic=%v) reads %s", name, generic, what)
			}
			if strings.Contains(p, "orders_status_idx") {
				t.Errorf("%s (generic=%v) reads orders_status_idx: it must start from the keys", name, generic)
			}
		}
	})
}

// TestReusablePlans: choosing an account's reusable authorization for a
// name, with the methods an order's profile offers, reads the candidates
// for that name (authorizations_reuse_idx) and their challenges from
// challenges_authz_idx, whatever the statistics: not the account's 20,000
// other valid authorizations (a fleet's account) or their 40,000
// challenges.
func TestReusablePlans(t *testing.T) {
	planCases(t, func(t *testing.T, conn *pgx.Conn, generic bool) {
		// A fleet's account: all 20,000 of its authorizations are valid
		// (the statistics, if any, still say pending), and a777's by its
		// challenge c777_0 (http-01). Each key must cost an index range of
		// its own name, not a walk through the account's valid ones.
		for _, q := range []string{
			"UPDATE authorizations SET status = 'valid'",
			"UPDATE challenges SET status = 'valid' WHERE id = 'c777_0'",
		} {
			if _, err := conn.Exec(context.Background(), q); err != nil {
				t.Fatal(err)
			}
		}
		keys := []store.AuthzKey{
			{Identifier: acme.Identifier{Type: acme.IdentifierDNS, Value: "h777.example.com"}},
			{Identifier: acme.Identifier{Type: acme.IdentifierDNS, Value: "absent.example.com"}},
		}
		for _, tc := range []struct {
			name    string
			methods []acme.ChallengeType
			rows    string // the rows the statement returns: a777's two challenges, or none
		}{
			{"any method", nil, "rows=2 "},
			{"offered", []acme.ChallengeType{acme.ChallengeHTTP01, acme.ChallengeDNS01}, "rows=2 "},
			{"not offered", []acme.ChallengeType{acme.ChallengeDNS01}, "rows=0 "},
		} {
			q, args := sqlstore.ReusableSQL(sqlstore.Postgres, "acct", keys, tc.methods, time.Now())
			p := explain(t, conn, generic, q, args...)
			t.Logf("%s, generic=%v:\n%s", tc.name, generic, p)
			if first := strings.SplitN(p, "\n", 2)[0]; !strings.Contains(first, "actual "+tc.rows) {
				t.Errorf("%s (generic=%v): the statement returned other than %s:\n%s", tc.name, generic, tc.rows, p)
			}
			if what := readsTooMuch(p, "authorizations", "challenges"); what != "" {
				t.Errorf("%s (generic=%v) reads %s", tc.name, generic, what)
			}
		}
	})
}

// fleetBase fills a migrated PostgreSQL database shaped like a fleet
// deployment's: one account ("acct") holding 20,000 authorizations and
// orders that will be valid (a1..a20000, o1..o20000, certificates
// s1..s20000), 3,000 pending ones (p1..p3000, po1..po3000; the first 100 of
// each past expiry), 2,000 that will be invalid (x1..x2000, io1..io2000),
// and a small account ("small") with a handful, whose five certificates
// are the only ones of their issuer ("i2") and profile ("short"). Each
// order's identifier is its authorization's name (hN.example.com is oN's
// and ioN's), each certificate's name its order's.
var fleetBase = []string{
	`DO $$ DECLARE t text; BEGIN FOREACH t IN ARRAY ARRAY['orders','authorizations','challenges','order_authz','order_identifiers','certificates','certificate_names','accounts'] LOOP
	   EXECUTE format('ALTER TABLE %I SET (autovacuum_enabled = false)', t); END LOOP; END $$`,
	`INSERT INTO accounts (id, key_jwk, thumbprint, status) VALUES ('acct', '{}', 'tp', 'valid'), ('small', '{}', 'tps', 'valid')`,
	`INSERT INTO authorizations (id, account_id, identifier_type, identifier_value, status, expires_at, created_at, updated_at)
	 SELECT 'a'||g, 'acct', 'dns', 'h'||g||'.example.com', 'pending', now() + interval '30 days', now() - (g % 60) * interval '1 day', now() - (g % 60) * interval '1 day' FROM generate_series(1, 20000) g`,
	`INSERT INTO authorizations (id, account_id, identifier_type, identifier_value, status, expires_at)
	 SELECT 'p'||g, 'acct', 'dns', 'n'||g||'.example.com', 'pending', CASE WHEN g <= 100 THEN now() - interval '1 hour' ELSE now() + interval '7 days' END FROM generate_series(1, 3000) g`,
	`INSERT INTO authorizations (id, account_id, identifier_type, identifier_value, status, expires_at, updated_at)
	 SELECT 'x'||g, 'acct', 'dns', 'h'||g||'.example.com', 'pending', now() + interval '7 days', now() - (g % 30) * interval '1 day' FROM generate_series(1, 2000) g`,
	`INSERT INTO authorizations (id, account_id, identifier_type, identifier_value, status, expires_at)
	 SELECT 'sa'||g, 'small', 'dns', 's'||g||'.small.test', 'pending', now() + interval '30 days' FROM generate_series(1, 5) g`,
	`INSERT INTO challenges (id, authz_id, position, type, token, status, updated_at)
	 SELECT 'c'||a.id||'_'||p, a.id, p, CASE p WHEN 0 THEN 'http-01' ELSE 'dns-01' END, 'tok', 'pending', now() - interval '1 hour'
	 FROM authorizations a, generate_series(0, 1) p`,
	`INSERT INTO orders (id, account_id, status, identifiers, profile, expires_at, cert_serial, created_at, updated_at)
	 SELECT 'o'||g, 'acct', 'pending', '[]', 'default', now() + interval '7 days', 's'||g, now() - (g % 200) * interval '1 day', now() - (g % 200) * interval '1 day' FROM generate_series(1, 20000) g`,
	`INSERT INTO orders (id, account_id, status, identifiers, profile, expires_at, created_at, updated_at)
	 SELECT 'po'||g, 'acct', 'pending', '[]', 'default', CASE WHEN g <= 100 THEN now() - interval '1 hour' ELSE now() + interval '7 days' END,
	   now() - interval '3 days', now() - interval '1 hour' FROM generate_series(1, 3000) g`,
	`INSERT INTO orders (id, account_id, status, identifiers, profile, expires_at, created_at)
	 SELECT 'io'||g, 'acct', 'pending', '[]', 'default', now() + interval '7 days', now() - (g % 30) * interval '1 day' FROM generate_series(1, 2000) g`,
	`INSERT INTO orders (id, account_id, status, identifiers, profile, expires_at, cert_serial)
	 SELECT 'so'||g, 'small', 'pending', '[]', 'default', now() + interval '7 days', 'ss'||g FROM generate_series(1, 5) g`,
	`INSERT INTO order_authz SELECT 'o'||g, 'a'||g, 0 FROM generate_series(1, 20000) g`,
	`INSERT INTO order_authz SELECT 'po'||g, 'p'||g, 0 FROM generate_series(1, 3000) g`,
	`INSERT INTO order_authz SELECT 'io'||g, 'x'||g, 0 FROM generate_series(1, 2000) g`,
	`INSERT INTO order_authz SELECT 'so'||g, 'sa'||g, 0 FROM generate_series(1, 5) g`,
	// Each certificate's key is its own but for s777's, which s778 shares
	// (keySiblingsCase).
	`INSERT INTO certificates (serial, order_id, account_id, issuer_id, profile, der, chain_pem, names, not_before, not_after, issued_at, spki_sha256)
	 SELECT 's'||g, 'o'||g, 'acct', 'i', 'default', '\x', '\x', '[]', now(), now() + interval '90 days', now() - (g % 200) * interval '1 day',
	   sha256(convert_to('k'||CASE g WHEN 778 THEN 777 ELSE g END, 'UTF8'))
	 FROM generate_series(1, 20000) g`,
	`INSERT INTO certificates (serial, order_id, account_id, issuer_id, profile, der, chain_pem, names, not_before, not_after, issued_at)
	 SELECT 'ss'||g, 'so'||g, 'small', 'i2', 'short', '\x', '\x', '[]', now(), now() + interval '90 days', now() FROM generate_series(1, 5) g`,
	`INSERT INTO order_identifiers (order_id, type, value)
	 SELECT oa.order_id, a.identifier_type, a.identifier_value FROM order_authz oa JOIN authorizations a ON a.id = oa.authz_id`,
	`INSERT INTO certificate_names (serial, name)
	 SELECT c.serial, oi.value FROM certificates c JOIN order_identifiers oi ON oi.order_id = c.order_id`,
	// Their issuers, as issuance registers them (OrderIssued) or migration
	// 0009 found them.
	`INSERT INTO issuers (id) SELECT DISTINCT issuer_id FROM certificates`,
}

// fleetShape moves the seed to the statuses a fleet's rows have: most
// authorizations and orders valid, some invalid, a few processing.
var fleetShape = []string{
	`UPDATE authorizations SET status = 'valid' WHERE id LIKE 'a%' OR id LIKE 'sa%'`,
	`UPDATE authorizations SET status = 'invalid' WHERE id LIKE 'x%'`,
	`UPDATE challenges SET status = 'valid', validated_at = now() - interval '1 day' WHERE position = 0 AND (authz_id LIKE 'a%' OR authz_id LIKE 'sa%')`,
	`UPDATE challenges SET status = 'invalid' WHERE authz_id LIKE 'x%'`,
	// ten challenges and ten orders left processing (Stranded's candidates)
	`UPDATE challenges SET status = 'processing', updated_at = now() - interval '1 hour' WHERE id IN (SELECT 'cp'||g||'_0' FROM generate_series(1, 10) g)`,
	`UPDATE orders SET status = 'valid' WHERE id LIKE 'o%' OR id LIKE 'so%'`,
	`UPDATE orders SET status = 'invalid' WHERE id LIKE 'io%'`,
	`UPDATE orders SET status = 'processing', updated_at = now() - interval '1 hour' WHERE id IN (SELECT 'po'||g FROM generate_series(2991, 3000) g)`,
	// ARI: s1000 was replaced by an order that failed; s1001 by one that is valid.
	`UPDATE certificates SET replaced_by = 'io5' WHERE serial = 's1000'`,
	`UPDATE certificates SET replaced_by = 'o2' WHERE serial = 's1001'`,
	// Five of the account's oldest certificates revoked, the only ones.
	`UPDATE certificates SET revoked_at = now() - interval '1 day', revocation_reason = 1 WHERE serial IN ('s1', 's2', 's3', 's4', 's5')`,
}

// fleetJobs are River's jobs of such a fleet: a completed job for every
// validated challenge and issued order (River keeps them a day by default,
// longer if configured), a backlog of outstanding validations, and a few
// of a rare kind (crl_generate) and a rare state (discarded).
var fleetJobs = []string{
	`INSERT INTO river_job (args, kind, max_attempts, queue, state, finalized_at)
	 SELECT jsonb_build_object('issuer_id', 'i'), 'crl_generate', 5, 'crl_i', 'completed', now() FROM generate_series(1, 5) g`,
	`INSERT INTO river_job (args, kind, max_attempts, queue, state, finalized_at)
	 SELECT jsonb_build_object('challenge_id', 'cx'||g||'_0'), 'challenge_validate', 5, 'default', 'discarded', now() FROM generate_series(1, 5) g`,
	`INSERT INTO river_job (args, kind, max_attempts, queue, state, finalized_at)
	 SELECT jsonb_build_object('challenge_id', 'ca'||g||'_0'), 'challenge_validate', 5, 'default', 'completed', now() FROM generate_series(1, 20000) g`,
	`INSERT INTO river_job (args, kind, max_attempts, queue, state, finalized_at)
	 SELECT jsonb_build_object('order_id', 'o'||g, 'profile', 'default'), 'signer_issue', 5, 'default', 'completed', now() FROM generate_series(1, 20000) g`,
	`INSERT INTO river_job (args, kind, max_attempts, queue, state)
	 SELECT jsonb_build_object('challenge_id', 'cp'||g||'_1'), 'challenge_validate', 5, 'default', 'available' FROM generate_series(11, 2000) g`,
	`INSERT INTO river_job (args, kind, max_attempts, queue, state)
	 SELECT jsonb_build_object('order_id', 'po'||g, 'profile', 'default'), 'signer_issue', 5, 'default', 'available' FROM generate_series(1001, 2990) g`,
	`ALTER TABLE river_job SET (autovacuum_enabled = false)`,
}

// fleetSeeded is a connection to a fleet's database (fleetBase), its
// statistics as mode says: "unanalyzed" (never), "analyzed" (after the
// statuses settled), "stale" (while every authorization and order was
// still pending; then they changed, and no autovacuum came).
func fleetSeeded(t *testing.T, mode string) *pgx.Conn {
	t.Helper()
	conn := migrated(t)
	run := func(qs ...string) { execAll(t, conn, qs...) }
	run(fleetBase...)
	run(fleetJobs...)
	switch mode {
	case "stale":
		run("ANALYZE")
		run(fleetShape...)
	case "analyzed":
		run(fleetShape...)
		run("ANALYZE")
	default:
		run(fleetShape...)
	}
	return conn
}

// keyHash is the hash a fleet's certificate's key has (fleetBase).
func keyHash(k string) []byte {
	h := sha256.Sum256([]byte(k))
	return h[:]
}

// fleetCase is a statement of the store's, as PostgreSQL runs it, with
// arguments naming the fleet's rows, and what it must return.
type fleetCase struct {
	name string
	q    string
	args []any
	rows string // the top node's "rows=N " ("" to not check)
	// custom: the store runs it after CustomPlansSQL, in a transaction
	// planning each statement afresh (txn.customPlans).
	custom bool
}

// fleetCases are the statements on the paths a fleet's clients and
// housekeeping run all the time.
func fleetCases() []fleetCase {
	pg := sqlstore.Postgres
	now := time.Now()
	cases := []fleetCase{
		// A challenge POST: cp2000_0 of pending p2000, while the account
		// has 2,900 other pending authorizations and 20,000 valid ones.
		{"ChallengeClaimSigned", sqlstore.ChallengeClaimSignedSQL(pg), []any{"cp2000_0", "acct"}, "rows=1 ", false},
		{"ChallengeClaimSigned (another account's)", sqlstore.ChallengeClaimSignedSQL(pg), []any{"cp2000_0", "small"}, "rows=0 ", false},
		// Storing an issued certificate (OrderIssued): o777's serial is
		// s777, stored already, so none is inserted; the order is read by
		// its key.
		// The issuing worker's read of a processing order (po3000, its
		// authorization p3000 pending) and the swap that stores its
		// certificate, which finds that authorization not valid: the
		// account, the order's authorizations and their challenges are
		// read by key, not the account's 20,000 valid authorizations.
		{"OrderToIssue", sqlstore.OrderToIssueSQL(pg), []any{"po3000", -(7 * time.Hour).Microseconds()}, "rows=1 ", false},
		{"OrderIssued: the swap", sqlstore.OrderIssuedSQL(pg), []any{"po3000", "snew"}, "rows=0 ", false},
		{"OrderIssued: certificate from its order", sqlstore.CertInsertSQL(pg), []any{"snew", "o777", "", "i", "", "\\x", "\\x", "[]", now, now, now, keyHash("knew"), 0}, "rows=0 ", false},
		// ARI replaces: s1000's replacing order io5 failed, so it may be
		// replaced again; s1001's, o2, is valid. The replacing order is
		// read by its key, not the account's 2,000 invalid orders.
		{"replace (prior replacer invalid)", sqlstore.ReplaceSQL(pg), []any{"s1000", "acct", "onew"}, "rows=0 ", false},
		{"replace (already replaced by a valid order)", sqlstore.ReplaceSQL(pg), []any{"s1001", "acct", "onew"}, "rows=0 ", false},
		// The CRL views' count of a remote issuer's revoked certificates
		// reads the revoked ones only, not the 20,000 issued.
		{"RevokedCount", sqlstore.RevokedCountSQL(pg), []any{"i", int64(math.MaxInt64)}, "rows=1 ", true},
		// The CRL views (the panel's overview and CRL page, 'hallmark crl
		// status') list the issuers, i and i2, on every view: not by
		// reading the issuer of every certificate.
		{"Issuers", sqlstore.IssuersSQL(pg), nil, "rows=2 ", false},
		// A key reported compromised (k777) finds its certificates, s777
		// and s778, by certificates_spki_idx, not by reading the 20,000;
		// a finalize refused for a blocked key reads the block by key.
		{"key siblings", sqlstore.KeySiblingsSQL(pg), []any{keyHash("k777")}, "rows=2 ", false},
		{"KeyBlockedBy", sqlstore.BlockedKeySQL(pg), []any{keyHash("k777")}, "rows=0 ", false},
		// Housekeeping's backfill of key hashes reads the five certificates
		// stored without one (ss1-ss5), by certificates_unhashed_idx, not
		// the 20,000 that have theirs.
		{"KeyHashBackfill", sqlstore.UnhashedSQL(pg), []any{1000}, "rows=5 ", false},
	}
	return append(cases, revokeManyCases()...)
}

// revokeManyCases are a bulk revocation's statements (RevokeMany) over
// one IN list of the account's certificates: each reads the listed rows
// by serial, not the account's 20,000 certificates.
func revokeManyCases() []fleetCase {
	const n = 100
	serials := make([]any, n)
	for i := range serials {
		serials[i] = fmt.Sprintf("s%d", 10001+i)
	}
	lock, revoke, _ := sqlstore.RevokeManySQL(sqlstore.Postgres, n)
	_, _, rows := sqlstore.RevokeManySQL(sqlstore.Postgres, 5)
	return []fleetCase{
		{"RevokeMany: lock", lock, serials, fmt.Sprintf("rows=%d ", n), true},
		{"RevokeMany: revoke", revoke, append([]any{4}, serials...), fmt.Sprintf("rows=%d ", n), true},
		// The fleet's revoked certificates, s1..s5, as the transaction
		// has just revoked them (an unrevoked one has no revocation time).
		{"RevokeMany: CRL entries", rows, []any{"s1", "s2", "s3", "s4", "s5"}, "", true},
	}
}

// TestFleetPlans: on a fleet's database (fleetSeeded), whatever the
// statistics (never taken, taken, taken before the statuses changed), in
// custom and generic plans, the statements of fleetCases read the rows
// they answer for, not the account's thousands of others.
func TestFleetPlans(t *testing.T) {
	t.Parallel()
	cases := func() []listCase {
		var out []listCase
		for _, c := range fleetCases() {
			out = append(out, listCase{fleetCase: c})
		}
		return out
	}
	checkFleetPlans(t, cases, "orders", "authorizations", "challenges", "order_authz", "certificates", "river_job")
}

// checkFleetPlans EXPLAINs each of cases on a fleet's database in each
// statistics mode (fleetSeeded), in custom and generic plans: each must
// return its rows (when a case names them) and read none of big whole, but
// for the plans a case names loose, which are logged.
func checkFleetPlans(t *testing.T, cases func() []listCase, big ...string) {
	for _, mode := range []string{"unanalyzed", "analyzed", "stale"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			conn := fleetSeeded(t, mode)
			for _, tc := range cases() {
				for _, generic := range []bool{false, true} {
					p := explain(t, conn, generic, tc.q, tc.args...)
					t.Logf("%s (generic=%v): %s", tc.name, generic, planSummary(p))
					if first := strings.SplitN(p, "\n", 2)[0]; tc.rows != "" && !strings.Contains(first, "actual "+tc.rows) {
						t.Errorf("%s (generic=%v): the statement returned other than %s:\n%s", tc.name, generic, tc.rows, p)
					}
					most := 999
					if tc.most > 0 {
						most = tc.most
					}
					what := readsOver(p, most, big...)
					switch {
					case what == "":
					case tc.loose != nil && tc.loose(mode, generic):
						t.Logf("%s (generic=%v): loose, reads %s", tc.name, generic, what)
					default:
						t.Errorf("%s (generic=%v) reads %s:\n%s", tc.name, generic, what, p)
					}
				}
			}
		})
	}
}

// listCase is a list statement of the store's (fleetCase) and the plans in
// which it may still read too much, if any.
type listCase struct {
	fleetCase
	// loose, when set, says which plans are not held to reading by key,
	// for the reason in the case's comment: a filter no index serves in
	// the list's order. They are logged, so a change to them shows.
	loose func(mode string, generic bool) bool
	// most is the most rows a scan may read, when a page is a thousand
	// (0: fewer than a thousand).
	most int
}

// Which plans a listCase's loose names.
var (
	anyPlan = func(string, bool) bool { return true }
	// A generic plan expects 1/n of the table for each of n values, and
	// reads the newest rows first.
	genericWithStats = func(mode string, generic bool) bool { return generic && mode != "unanalyzed" }
	// Without statistics, or in a generic plan, a range of not_after is
	// expected to hold a third of the table.
	unknownRange = func(mode string, generic bool) bool { return generic || mode == "unanalyzed" }
	// Without statistics, an equality is expected to hold 0.5% of the
	// table.
	noStatistics = func(mode string, _ bool) bool { return mode == "unanalyzed" }
)

// fleetListCases are the operator's filtered lists (the admin panel's, the
// CLI's, revocation.Service.Select's pages, ARI moves) as the store builds
// them, on a fleet's database: no filter and each filter alone, for a value
// that names thousands of rows (one page is read) and one that names a few
// (they are read by key).
func fleetListCases() []listCase {
	pg := sqlstore.Postgres
	first := store.Page{}
	yes, no := true, false
	// Every certificate expires in 90 days: none before soon, all before
	// late.
	soon, late := time.Now().Add(30*24*time.Hour), time.Now().Add(100*24*time.Hour)
	c := func(name, rows string, q string, args []any) listCase {
		return listCase{fleetCase: fleetCase{name: name, q: q, args: args, rows: rows}}
	}
	orders := func(name, rows string, f store.OrderFilter) listCase {
		q, args := sqlstore.OrdersListSQL(pg, f, first)
		return c("OrdersList "+name, rows, q, args)
	}
	certs := func(name, rows string, f store.CertFilter, p store.Page) listCase {
		q, args := sqlstore.CertificatesListSQL(pg, f, p)
		return c("CertificatesList "+name, rows, q, args)
	}
	jobIDs := func(name, rows string, f store.JobFilter) listCase {
		q, args := sqlstore.JobIDsSQL(pg, f, first)
		return c("JobIDs "+name, rows, q, args)
	}
	movable := func(name, rows string, sel store.RenewalSelector) listCase {
		q, args := sqlstore.MovableSQL(pg, sel)
		return c("RenewalMove "+name, rows, q, args)
	}
	loose := func(lc listCase, plans func(string, bool) bool) listCase {
		lc.loose = plans
		return lc
	}
	selectPage := func(lc listCase) listCase {
		lc.most = 1001
		return lc
	}
	// A page is 50 rows, fetched with one more.
	const page = "rows=51 "
	return []listCase{
		orders("no filter", page, store.OrderFilter{}),
		orders("account (25,000 orders)", page, store.OrderFilter{AccountID: "acct"}),
		orders("account (5 orders)", "rows=5 ", store.OrderFilter{AccountID: "small"}),
		orders("identifier", "rows=2 ", store.OrderFilter{Identifier: "h777.example.com"}),
		orders("status (20,005 valid)", page, store.OrderFilter{Status: acme.StatusValid}),
		orders("status (10 processing)", "rows=10 ", store.OrderFilter{Status: acme.StatusProcessing}),

		certs("no filter", page, store.CertFilter{}, first),
		certs("account (20,000 certificates)", page, store.CertFilter{AccountID: "acct"}, first),
		certs("account (5 certificates)", "rows=5 ", store.CertFilter{AccountID: "small"}, first),
		// The panel and the CLI page through an account's certificates
		// with the cursor: a later page is a range too.
		certs("account, a later page", page, store.CertFilter{AccountID: "acct"}, store.Page{After: "10000"}),
		// revocation.Service.Select reads an account's certificates
		// (hallmark revoke --account) a page of 1,000 at a time: one range
		// of the account's index too, of that page only.
		selectPage(certs("account, a page of revocation.Select", "rows=1001 ", store.CertFilter{AccountID: "acct"}, store.Page{After: "10000", Limit: 1000})),
		certs("name", "rows=1 ", store.CertFilter{Name: "h777.example.com"}, first),
		certs("revoked (5)", "rows=5 ", store.CertFilter{Revoked: &yes}, first),
		certs("unrevoked", page, store.CertFilter{Revoked: &no}, first),
		// No index gives not_after and seq together: the newest
		// certificates are read until a page is found (all of them when
		// none expires that soon, unless statistics say so), or the
		// expiring ones are read and sorted (all of them when every one
		// expires that soon).
		loose(certs("expiring before (none)", "rows=0 ", store.CertFilter{ExpiringBefore: &soon}, first), unknownRange),
		certs("expiring before (all)", page, store.CertFilter{ExpiringBefore: &late}, first),

		jobIDs("no filter", page, store.JobFilter{}),
		// River's indexes on kind and state are not in id order (and the
		// store's migrations run before River's, so they cannot add one):
		// a kind or state's jobs are read whole and sorted, or the newest
		// jobs until a page matches. By key only for a rare value, in a
		// custom plan; one page only when the newest jobs match.
		loose(jobIDs("kind (21,995 challenge_validate)", page, store.JobFilter{Kind: "challenge_validate"}), anyPlan),
		loose(jobIDs("kind (5 crl_generate)", "rows=5 ", store.JobFilter{Kind: "crl_generate"}), genericWithStats),
		loose(jobIDs("state (40,005 completed)", page, store.JobFilter{State: "completed"}), anyPlan),
		loose(jobIDs("state (3,980 available)", page, store.JobFilter{State: "available"}), noStatistics),
		loose(jobIDs("state (5 discarded)", "rows=5 ", store.JobFilter{State: "discarded"}), genericWithStats),

		movable("serial", "rows=1 ", store.RenewalSelector{Serial: "s777"}),
		// No index serves an issuer or a profile, by choice: a move by
		// either is an operator's incident tool, run once, and reading
		// every live certificate then costs less than two more index
		// entries written by every issuance.
		loose(movable("issuer", "rows=5 ", store.RenewalSelector{IssuerID: "i2"}), anyPlan),
		loose(movable("profile", "rows=5 ", store.RenewalSelector{Profile: "short"}), anyPlan),
		// Without statistics the account's index is ANDed with
		// certificates_not_after_idx's live range: every live
		// certificate's index entry, not its row.
		loose(movable("account", "rows=5 ", store.RenewalSelector{AccountID: "small"}), noStatistics),
	}
}

// TestFleetListPlans: on a fleet's database, whatever the statistics, in
// custom and generic plans, each list of fleetListCases reads one page or
// the few rows its filter names, through the filter's index, not the
// fleet's tens of thousands of orders, certificates and jobs; but for the
// plans a case names loose, which are logged.
func TestFleetListPlans(t *testing.T) {
	t.Parallel()
	checkFleetPlans(t, fleetListCases, "orders", "order_identifiers", "certificates", "certificate_names", "river_job")
}

// planSummary is a plan's scans on one line: each scan node, its rows,
// and the rows its filter threw away.
func planSummary(plan string) string {
	var out []string
	for _, line := range strings.Split(plan, "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "->"))
		switch {
		case strings.Contains(line, "Scan") && strings.Contains(line, "actual"):
			out = append(out, strings.Replace(line, " (actual ", " (", 1))
		case strings.HasPrefix(line, "Rows Removed by") && len(out) > 0:
			out[len(out)-1] += " [" + line + "]"
		}
	}
	return strings.Join(out, "; ")
}

// TestExpirePendingPlan: housekeeping's order statement checks each open
// order's authorizations by key, whatever the statistics, and never reads
// every authorization (or order_authz row) ever stored: on a fleet's
// database 25,000 of them, a set that grows with every expired or failed
// authorization. The open orders (2,990 here) are read; their number is
// bounded by the order lifetime.
func TestExpirePendingPlan(t *testing.T) {
	t.Parallel()
	historic := regexp.MustCompile(`(?m)^.*(Scan|Index).* on (authorizations|order_authz)\b.*actual rows=\d{4,}.*$|hashed SubPlan`)
	for _, mode := range []string{"unanalyzed", "analyzed", "stale"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			conn := fleetSeeded(t, mode)
			for _, generic := range []bool{false, true} {
				p := explain(t, conn, generic, sqlstore.ExpireOrdersSQL(sqlstore.Postgres), `{"type":"urn:ietf:params:acme:error:unauthorized"}`)
				if m := historic.FindString(p); m != "" {
					t.Errorf("generic=%v: reads the stored authorizations: %s\n%s", generic, strings.TrimSpace(m), p)
				}
			}
		})
	}
}

// TestBacklogPlans: each compare-and-swap of the issuance path reads its
// one row by key while a backlog of rows in the status it tests has built
// up since the statistics were taken (10,000 processing challenges and
// orders, pending authorizations and challenges, ready orders, against
// statistics that saw none: autovacuum analyzes after a tenth of a table
// changed, and not at all when it is off). The statuses have partial
// indexes, which such statistics take for nearly empty: a swap that tested
// its status plainly read the whole backlog through one, 10,000 rows for
// each swap, so draining a backlog took time quadratic in its size.
func TestBacklogPlans(t *testing.T) {
	t.Parallel()
	conn := migrated(t)
	execAll(t, conn, []string{
		`DO $$ DECLARE t text; BEGIN FOREACH t IN ARRAY ARRAY['orders','authorizations','challenges','order_authz','accounts'] LOOP
		   EXECUTE format('ALTER TABLE %I SET (autovacuum_enabled = false)', t); END LOOP; END $$`,
		`INSERT INTO accounts (id, key_jwk, thumbprint, status) VALUES ('acct', '{}', 'tp', 'valid')`,
		`INSERT INTO orders (id, account_id, status, identifiers, profile, expires_at)
		 SELECT 'o'||g, 'acct', 'valid', '[]', 'default', now() + interval '7 days' FROM generate_series(1, 50000) g`,
		`INSERT INTO authorizations (id, account_id, identifier_type, identifier_value, status, expires_at)
		 SELECT 'a'||g, 'acct', 'dns', 'h'||g||'.example.com', 'valid', now() + interval '30 days' FROM generate_series(1, 50000) g`,
		`INSERT INTO order_authz SELECT 'o'||g, 'a'||g, 0 FROM generate_series(1, 50000) g`,
		`INSERT INTO challenges (id, authz_id, position, type, token, status)
		 SELECT 'c'||g, 'a'||g, 0, 'http-01', 'tok', 'valid' FROM generate_series(1, 50000) g`,
		`ANALYZE`,
		// The backlog, unseen by the statistics.
		`UPDATE orders SET status = 'pending' WHERE id IN (SELECT 'o'||g FROM generate_series(20001, 30000) g)`,
		`UPDATE orders SET status = 'ready' WHERE id IN (SELECT 'o'||g FROM generate_series(30001, 40000) g)`,
		`UPDATE orders SET status = 'processing' WHERE id IN (SELECT 'o'||g FROM generate_series(40001, 50000) g)`,
		`UPDATE authorizations SET status = 'pending' WHERE id IN (SELECT 'a'||g FROM generate_series(20001, 40000) g)`,
		`UPDATE challenges SET status = 'pending' WHERE id IN (SELECT 'c'||g FROM generate_series(20001, 30000) g)`,
		`UPDATE challenges SET status = 'processing' WHERE id IN (SELECT 'c'||g FROM generate_series(30001, 40000) g)`,
	}...)
	swaps := sqlstore.SwapSQL(sqlstore.Postgres)
	cases := []struct {
		name string
		args []any
		rows string
	}{
		{"ChallengeClaim", []any{"c25000", ""}, "rows=1 "},
		{"ChallengeClaimSigned", []any{"c25000", "acct"}, "rows=1 "},
		{"verdict: the challenge", []any{"c35000", "valid", "", "{}"}, "rows=1 "},
		{"verdict: the authz", []any{"c35000", "valid"}, "rows=0 "},
		{"verdict: persistUntil", []any{"c35000", time.Now()}, "rows=0 "},
		{"OrderFinalizeBegin", []any{"o35000", "\\x", "default", keyHash("k"), ""}, "rows=1 "},
		{"OrderFinalizeSigned", []any{"o35000", "\\x", "default", keyHash("k"), "acct"}, "rows=1 "},
		{"OrderIssued: the swap", []any{"o45000", "snew"}, "rows=0 "},
		{"OrderFail", []any{"o45000", "{}"}, "rows=0 "},
	}
	if len(cases) != len(swaps) {
		t.Fatalf("%d cases for %d swaps: every swap needs a case", len(cases), len(swaps))
	}
	for _, tc := range cases {
		q, ok := swaps[tc.name]
		if !ok {
			t.Fatalf("no swap named %q", tc.name)
		}
		for _, generic := range []bool{false, true} {
			p := explain(t, conn, generic, q, tc.args...)
			t.Logf("%s (generic=%v): %s", tc.name, generic, planSummary(p))
			if first := strings.SplitN(p, "\n", 2)[0]; !strings.Contains(first, "actual "+tc.rows) {
				t.Errorf("%s (generic=%v): returned other than %s:\n%s", tc.name, generic, tc.rows, p)
			}
			if what := readsOver(p, 10, "orders", "authorizations", "challenges"); what != "" {
				t.Errorf("%s (generic=%v) reads %s:\n%s", tc.name, generic, what, p)
			}
		}
	}
}
