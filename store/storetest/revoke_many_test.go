package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/store"
)

// seedCopies stores n copies of certificate template, serials prefix1 ..
// prefixN, with issuer: enough certificates to cross RevokeMany's IN lists
// without n orders (one statement that reads the same in both dialects).
func seedCopies(t *testing.T, x Extras, template, prefix, issuer string, n int) []string {
	t.Helper()
	x.Exec(t, fmt.Sprintf(`WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %d)
INSERT INTO certificates (serial, order_id, account_id, issuer_id, profile, der, chain_pem, names, not_before, not_after, issued_at)
SELECT '%s' || n.i, order_id, account_id, '%s', profile, der, chain_pem, names, not_before, not_after, issued_at
FROM n, certificates WHERE serial = '%s'`, n, prefix, issuer, template))
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i+1)
	}
	return out
}

// testRevokeMany: one call revokes a page of local certificates of two
// issuers (more than one IN list of them), skips the unknown and the
// already revoked (whose reason it leaves), writes a revocation row and an
// audit event per certificate it revoked and queues one crl_generate job
// per issuer; a relay's certificate among them fails it as a whole.
func testRevokeMany(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	mustIssue(t, s, readyOrder(t, s, a, "many.example.com"), "a0")
	one := seedCopies(t, x, "a0", "a", "issuer-1", 120)
	two := seedCopies(t, x, "a0", "b", "issuer-2", 3)
	relay := seedCopies(t, x, "a0", "r", "relay:up", 1)
	if _, err := s.Revoke(ctx, "a5", 1, store.AuditEvent{Actor: "cli:before", Action: "revoke", Subject: "a5"}); err != nil {
		t.Fatal(err)
	}
	jobsBefore := jobCount(t, x, jobs.KindCRLGenerate)

	_, err := s.RevokeMany(ctx, []string{"a1", relay[0]}, 4, store.AuditEvent{Actor: "cli:alice", Action: "revoke"})
	if err == nil {
		t.Fatal("RevokeMany with a relay's certificate succeeded; want it refused")
	}
	if c, _ := s.CertificateBySerial(ctx, "a1"); c.RevokedAt != nil {
		t.Fatal("a refused RevokeMany revoked a1 all the same")
	}

	page := slices.Concat(one, two, []string{"nope", "a7"}) // a7 twice, "nope" unknown
	got, err := s.RevokeMany(ctx, page, 4, store.AuditEvent{Actor: "cli:alice", Action: "revoke", Detail: "bulk"})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, sr := range slices.Concat(one, two) {
		if sr != "a5" {
			want = append(want, sr)
		}
	}
	var serials []string
	for _, c := range got {
		serials = append(serials, c.Serial)
		if c.RevokedAt == nil || c.RevocationReason != 4 {
			t.Errorf("RevokeMany returned %s as %v with reason %d, want revoked with 4", c.Serial, c.RevokedAt, c.RevocationReason)
		}
	}
	if !slices.Equal(serials, want) {
		t.Fatalf("RevokeMany revoked %v, want %v", serials, want)
	}
	for _, tc := range []struct {
		what  string
		query string
		want  int64
	}{
		{"crl_generate jobs it queued", "SELECT count(*) FROM river_job WHERE kind = '" + jobs.KindCRLGenerate + "'", jobsBefore + 2},
		{"crl_generate jobs of issuer-1", "SELECT count(*) FROM river_job WHERE queue = '" + jobs.IssuerQueue("issuer-1") + "'", jobsBefore + 1},
		{"revocation rows of issuer-1", "SELECT count(*) FROM revocations WHERE issuer_id = 'issuer-1'", 120},
		{"revocation rows of issuer-2", "SELECT count(*) FROM revocations WHERE issuer_id = 'issuer-2'", 3},
		{"revocation rows of the relay", "SELECT count(*) FROM revocations WHERE issuer_id = 'relay:up'", 0},
		{"audit events by cli:alice", "SELECT count(*) FROM audit_events WHERE actor = 'cli:alice' AND detail = 'bulk'", int64(len(want))},
		{"audit subjects by cli:alice", "SELECT count(DISTINCT subject) FROM audit_events WHERE actor = 'cli:alice'", int64(len(want))},
		{"audit events of a5", "SELECT count(*) FROM audit_events WHERE subject = 'a5'", 1},
		{"a5's reason", "SELECT revocation_reason FROM certificates WHERE serial = 'a5'", 1},
		{"revoked certificates with reason 4", "SELECT count(*) FROM certificates WHERE revocation_reason = 4 AND revoked_at IS NOT NULL", int64(len(want))},
		{"revocation rows not matching their certificate", "SELECT count(*) FROM revocations r, certificates c WHERE r.serial = c.serial AND (r.revoked_at <> c.revoked_at OR r.reason <> c.revocation_reason)", 0},
	} {
		if n := x.Int(t, tc.query); n != tc.want {
			t.Errorf("%s: %d, want %d", tc.what, n, tc.want)
		}
	}
	if got, err := s.RevokeMany(ctx, page, 4, store.AuditEvent{Actor: "cli:alice", Action: "revoke"}); err != nil || len(got) != 0 {
		t.Errorf("RevokeMany again = %d certificates, %v; want none", len(got), err)
	}
	if n := jobCount(t, x, jobs.KindCRLGenerate); n != jobsBefore+2 {
		t.Errorf("%d crl_generate jobs after revoking nothing, want %d", n, jobsBefore+2)
	}
}

// testRevokeManyConcurrent: a certificate revoked by someone else (Revoke
// through another handle) while RevokeMany runs is revoked once: by one of
// them, with one revocation row and one audit event, and the other says
// so (ErrConflict, or not returned).
func testRevokeManyConcurrent(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	other := x.Open(t, nil)
	a := newAccount(t, s)
	mustIssue(t, s, readyOrder(t, s, a, "race.example.com"), "c0")
	bulkWins := 0
	for round := range 8 {
		page := seedCopies(t, x, "c0", fmt.Sprintf("r%dx", round), "issuer-1", 150)
		contested := page[len(page)/2+round]
		var wg sync.WaitGroup
		var single error
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, single = other.Revoke(ctx, contested, 1, store.AuditEvent{Actor: "admin:bob", Action: "revoke", Subject: contested})
		}()
		got, err := s.RevokeMany(ctx, page, 4, store.AuditEvent{Actor: "cli:alice", Action: "revoke"})
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		bulkWon := slices.ContainsFunc(got, func(c *store.Certificate) bool { return c.Serial == contested })
		switch {
		case bulkWon && single == nil, !bulkWon && single != nil:
			t.Fatalf("round %d: RevokeMany returned %s: %v; Revoke: %v; want exactly one of them to revoke it", round, contested, bulkWon, single)
		case bulkWon:
			wantErr(t, "the single revocation that lost", single, store.ErrConflict)
			bulkWins++
		}
		if len(got) != len(page)-1 && !bulkWon || bulkWon && len(got) != len(page) {
			t.Fatalf("round %d: RevokeMany revoked %d of %d", round, len(got), len(page))
		}
		for what, q := range map[string]string{
			"revocation rows": "SELECT count(*) FROM revocations WHERE serial = '" + contested + "'",
			"audit events":    "SELECT count(*) FROM audit_events WHERE subject = '" + contested + "'",
		} {
			if n := x.Int(t, q); n != 1 {
				t.Fatalf("round %d: %d %s of %s, want 1", round, n, what, contested)
			}
		}
	}
	// Which one wins is the scheduler's; both are fine.
	t.Logf("RevokeMany won %d of 8 rounds", bulkWins)
}
