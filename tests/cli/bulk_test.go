package cli

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/hallmark-ca/hallmark/store"
)

// sqlInt runs q on a connection of its own to the CA's database and
// returns the first column of its first row (0 for a statement).
func (c *ca) sqlInt(q string) int64 {
	c.t.Helper()
	ctx := context.Background()
	var n int64
	if path, ok := strings.CutPrefix(c.url, "sqlite:"); ok {
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
		if err != nil {
			c.t.Fatal(err)
		}
		defer db.Close()
		if err := db.QueryRowContext(ctx, q).Scan(&n); err != nil && err != sql.ErrNoRows {
			c.t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	conn, err := pgx.Connect(ctx, c.url)
	if err != nil {
		c.t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, q).Scan(&n); err != nil && err != pgx.ErrNoRows {
		c.t.Fatalf("%s: %v", q, err)
	}
	return n
}

// copies stores n copies of certificate template (its account, order,
// profile and times) with issuer, serials prefix1 .. prefixN: an
// account's thousand certificates without a thousand orders.
func (c *ca) copies(template, prefix, issuer string, n int) {
	c.t.Helper()
	c.sqlInt(fmt.Sprintf(`WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %d)
INSERT INTO certificates (serial, order_id, account_id, issuer_id, profile, der, chain_pem, names, not_before, not_after, issued_at)
SELECT '%s' || n.i, order_id, account_id, '%s', profile, der, chain_pem, names, not_before, not_after, issued_at
FROM n, certificates WHERE serial = '%s'`, n, prefix, issuer, template))
}

// TestRevokeAccountPages: `hallmark revoke --account` over more than one
// page (1,000 certificates) revokes every local certificate once, queues at
// most one crl_generate job per issuer per page (it queued one per
// certificate), and reports every certificate as before: already revoked,
// revoked, queued for its relay, failed (a relay no profile names), with
// exit 4 for the failure. Run again, it revokes nothing and queues no CRL.
func TestRevokeAccountPages(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			c := newCA(t, d.url(t))
			c.configure(backendsConfig)
			a, b := c.account(), c.account()
			c.issued(a, "bulk.example.com", "1000")
			c.issued(b, "other.example.com", "2000")
			c.copies("1000", "a", "issuer-1", 1050)
			c.copies("1000", "b", "issuer-2", 20)
			c.copies("1000", "r", "relay:corp", 2)
			c.copies("1000", "x", "relay:retired", 1)
			if _, err := c.st().Revoke(context.Background(), "a7", 1, store.AuditEvent{Actor: "admin:bob", Action: "revoke", Subject: "a7"}); err != nil {
				t.Fatal(err)
			}
			const total = 1 + 1050 + 20 + 2 + 1
			crlBefore := c.sqlInt(`SELECT count(*) FROM river_job WHERE kind = 'crl_generate'`)

			var rep struct {
				CRLQueued    []string `json:"crl_queued"`
				Certificates []struct {
					Serial, Outcome, Backend, Error string
				} `json:"certificates"`
			}
			r := c.want(4, "revoke", "--json", "--account", a.ID, "--reason", "superseded")
			if !strings.Contains(r.stderr, fmt.Sprintf("1 of %d revocations failed", total-1)) {
				t.Errorf("stderr %q does not say one revocation failed", r.stderr)
			}
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
				t.Fatal(err)
			}
			outcomes := map[string]string{}
			for _, row := range rep.Certificates {
				if _, twice := outcomes[row.Serial]; twice {
					t.Errorf("certificate %s reported twice", row.Serial)
				}
				outcomes[row.Serial] = row.Outcome
			}
			if len(outcomes) != total {
				t.Fatalf("%d certificates reported, want %d", len(outcomes), total)
			}
			for _, tc := range []struct{ serial, outcome string }{
				{"1000", "revoked"}, {"a1", "revoked"}, {"a1050", "revoked"}, {"b20", "revoked"},
				{"a7", "already-revoked"}, {"r1", "queued"}, {"r2", "queued"}, {"x1", "failed"},
			} {
				if outcomes[tc.serial] != tc.outcome {
					t.Errorf("certificate %s: outcome %q, want %q", tc.serial, outcomes[tc.serial], tc.outcome)
				}
			}
			if fmt.Sprint(rep.CRLQueued) != "[issuer-1 issuer-2]" {
				t.Errorf("crl_queued = %v, want [issuer-1 issuer-2]", rep.CRLQueued)
			}
			actor := cliActor(t)
			for _, tc := range []struct {
				what, query string
				want        int64
			}{
				{"rows reported revoked", "", int64(total - 4)},
				{"revoked local certificates", `SELECT count(*) FROM certificates WHERE revoked_at IS NOT NULL AND revocation_reason = 4 AND issuer_id IN ('issuer-1', 'issuer-2')`, total - 4},
				{"revocation rows", `SELECT count(*) FROM revocations`, total - 3},
				{"revoked certificates without a revocation row", `SELECT count(*) FROM certificates c WHERE revoked_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM revocations r WHERE r.serial = c.serial)`, 0},
				{"a7's reason", `SELECT revocation_reason FROM certificates WHERE serial = 'a7'`, 1},
				{"revoked relay certificates", `SELECT count(*) FROM certificates WHERE revoked_at IS NOT NULL AND issuer_id LIKE 'relay:%'`, 0},
				{"the other account's revoked certificates", `SELECT count(*) FROM certificates WHERE revoked_at IS NOT NULL AND serial = '2000'`, 0},
				{"revoke audit events by " + actor, `SELECT count(*) FROM audit_events WHERE action = 'revoke' AND actor = '` + actor + `'`, total - 2},
				{"certificates with an audit event by " + actor, `SELECT count(DISTINCT subject) FROM audit_events WHERE action = 'revoke' AND actor = '` + actor + `'`, total - 2},
				{"signer_revoke jobs", `SELECT count(*) FROM river_job WHERE kind = 'signer_revoke'`, 2},
			} {
				got := int64(0)
				if tc.query == "" {
					for _, o := range outcomes {
						if o == "revoked" {
							got++
						}
					}
				} else {
					got = c.sqlInt(tc.query)
				}
				if got != tc.want {
					t.Errorf("%s: %d, want %d", tc.what, got, tc.want)
				}
			}
			// Two pages, two issuers: at most one job per issuer per page
			// (three here: the first page holds both issuers, the second
			// only issuer-1).
			crl := c.sqlInt(`SELECT count(*) FROM river_job WHERE kind = 'crl_generate'`) - crlBefore
			if crl < 2 || crl > 4 {
				t.Errorf("%d crl_generate jobs for %d revocations over 2 pages of 2 issuers, want 2 to 4", crl, total-4)
			}
			t.Logf("%d crl_generate jobs for %d revocations", crl, total-4)

			r = c.want(4, "revoke", "--json", "--account", a.ID)
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
				t.Fatal(err)
			}
			again := map[string]int{}
			for _, row := range rep.Certificates {
				again[row.Outcome]++
			}
			if again["already-revoked"] != total-3 || again["queued"] != 2 || again["failed"] != 1 || len(rep.CRLQueued) != 0 {
				t.Errorf("revoking again: outcomes %v, crl_queued %v; want %d already-revoked, 2 queued, 1 failed, no CRL", again, rep.CRLQueued, total-3)
			}
			if n := c.sqlInt(`SELECT count(*) FROM river_job WHERE kind = 'crl_generate'`) - crlBefore; n != crl {
				t.Errorf("revoking again queued %d more crl_generate jobs", n-crl)
			}
		})
	}
}
