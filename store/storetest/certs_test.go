package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

func testCertificateSerialUnique(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	o1 := readyOrder(t, s, a, "one.example.com")
	o2 := readyOrder(t, s, a, "two.example.com")
	mustIssue(t, s, o1, "abcdef01")
	wantErr(t, "second certificate with one serial", issue(t, s, o2, "abcdef01"), store.ErrConflict)
	if got := order(t, s, o2.ID); got.Status != acme.StatusProcessing || got.CertSerial != "" {
		t.Fatalf("order is %s with serial %q after its certificate conflicted, want processing with none", got.Status, got.CertSerial)
	}
	if c, err := s.CertificateBySerial(ctx, "abcdef01"); err != nil || c.OrderID != o1.ID {
		t.Fatalf("certificate = %+v, %v; want the first order's", c, err)
	}
}

func testCertificatesList(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a, b := newAccount(t, s), newAccount(t, s)
	for i, acct := range []*store.Account{a, a, b} {
		o := readyOrder(t, s, acct, fmt.Sprintf("host%d.example.com", i))
		mustIssue(t, s, o, fmt.Sprintf("%02x", i+1))
	}
	if _, err := s.Revoke(ctx, "02", 1, store.AuditEvent{Actor: "cli:test", Action: "revoke", Subject: "02"}); err != nil {
		t.Fatal(err)
	}
	yes, no := true, false
	soon := dbNow(t, s).Add(24 * time.Hour)
	serials := func(f store.CertFilter) []string {
		t.Helper()
		list, _, err := s.CertificatesList(ctx, f, store.Page{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range list {
			out = append(out, c.Serial)
		}
		return out
	}
	for name, tc := range map[string]struct {
		f    store.CertFilter
		want []string
	}{
		"all":         {store.CertFilter{}, []string{"03", "02", "01"}},
		"account":     {store.CertFilter{AccountID: a.ID}, []string{"02", "01"}},
		"name":        {store.CertFilter{Name: "host2.example.com"}, []string{"03"}},
		"revoked":     {store.CertFilter{Revoked: &yes}, []string{"02"}},
		"not revoked": {store.CertFilter{Revoked: &no}, []string{"03", "01"}},
		"expiring":    {store.CertFilter{ExpiringBefore: &soon}, nil},
	} {
		if got := serials(tc.f); !slices.Equal(got, tc.want) {
			t.Errorf("CertificatesList %s = %v, want %v", name, got, tc.want)
		}
	}
	page, next, err := s.CertificatesList(ctx, store.CertFilter{}, store.Page{Limit: 2})
	if err != nil || len(page) != 2 || next == "" {
		t.Fatalf("first page: %d certificates, next %q, %v", len(page), next, err)
	}
	rest, next, err := s.CertificatesList(ctx, store.CertFilter{}, store.Page{After: next, Limit: 2})
	if err != nil || len(rest) != 1 || rest[0].Serial != "01" || next != "" {
		t.Fatalf("second page: %+v next %q %v", rest, next, err)
	}
	// One filtered certificate a page, as revocation.Service.Select reads
	// an account's.
	var walked []string
	p := store.Page{Limit: 1}
	for range 3 {
		page, next, err := s.CertificatesList(ctx, store.CertFilter{AccountID: a.ID}, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range page {
			walked = append(walked, c.Serial)
		}
		if next == "" {
			break
		}
		p.After = next
	}
	if !slices.Equal(walked, []string{"02", "01"}) {
		t.Errorf("the account's certificates one a page: %v, want [02 01]", walked)
	}
}

func testRevoke(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	o := readyOrder(t, s, a, "revoke.example.com")
	mustIssue(t, s, o, "beef")
	ev := store.AuditEvent{Actor: "cli:alice", Action: "revoke", Subject: "beef", Detail: "keyCompromise"}
	c, err := s.Revoke(ctx, "beef", 1, ev)
	if err != nil || c.RevokedAt == nil || c.RevocationReason != 1 {
		t.Fatalf("Revoke = %+v, %v", c, err)
	}
	revs, err := s.Revocations(ctx, "issuer-1")
	if err != nil || len(revs) != 1 || revs[0].Serial != "beef" || revs[0].Reason != 1 || !revs[0].RevokedAt.Equal(*c.RevokedAt) {
		t.Fatalf("Revocations = %+v, %v", revs, err)
	}
	if revs, err := s.Revocations(ctx, "other-issuer"); err != nil || len(revs) != 0 {
		t.Fatalf("another issuer has revocations %v (%v)", revs, err)
	}
	if n := jobCount(t, x, jobs.KindCRLGenerate); n != 1 {
		t.Fatalf("%d crl_generate jobs after a revocation, want 1", n)
	}
	evs, _, err := s.AuditList(ctx, store.Page{})
	if err != nil || len(evs) != 1 || evs[0].Actor != "cli:alice" || evs[0].Subject != "beef" || evs[0].At.IsZero() {
		t.Fatalf("audit after revocation = %+v, %v", evs, err)
	}
	_, err = s.Revoke(ctx, "beef", 4, ev)
	wantErr(t, "revoking twice", err, store.ErrConflict)
	if c, _ := s.CertificateBySerial(ctx, "beef"); c.RevocationReason != 1 {
		t.Fatalf("second revocation changed the reason to %d", c.RevocationReason)
	}
	if n := jobCount(t, x, jobs.KindCRLGenerate); n != 1 {
		t.Fatalf("%d crl_generate jobs after a refused revocation, want 1", n)
	}
}

// testRevokeQueue: a relay's certificate is revoked through its backend:
// RevokeQueue queues signer_revoke on the profile's queue it is given, and
// Revoke refuses it (no revocation row, no crl_generate: Hallmark signs no
// CRL for a remote issuer, and "crl_relay:up" is no River queue name).
func testRevokeQueue(t *testing.T, s store.Store, x Extras) {
	a := newAccount(t, s)
	relayIssued(t, s, a)
	id := relayRevokeQueued(t, s, x, a)
	relayRevokeAnswered(t, s, x, id)
}

// relayIssued issues certificate "cafe" of issuer relay:up to account a,
// and sees Revoke refuse it.
func relayIssued(t *testing.T, s store.Store, a *store.Account) {
	ctx := ctxT(t)
	o := readyOrder(t, s, a, "relay.example.com")
	if _, claimed, err := s.OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, o.Profile, []byte("csr"), nil); err != nil || !claimed {
		t.Fatalf("OrderFinalizeBegin: claimed=%v err=%v", claimed, err)
	}
	now := dbNow(t, s)
	if err := s.OrderIssued(ctx, store.Issued{OrderID: o.ID, Certificate: store.Certificate{
		Serial: "cafe", IssuerID: "relay:up", Profile: "old", DER: []byte{0x30, 0x01}, ChainPEM: []byte("-----BEGIN CERTIFICATE-----\n"),
		Names: []string{"relay.example.com"}, NotBefore: now, NotAfter: now.Add(90 * 24 * time.Hour),
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Revoke(ctx, "cafe", 4, store.AuditEvent{Actor: "cli:test", Action: "revoke", Subject: "cafe"}); err == nil || !strings.Contains(err.Error(), "publishes its own revocation status") {
		t.Fatalf("Revoke of a relay's certificate: %v, want refused", err)
	}
	if c, err := s.CertificateBySerial(ctx, "cafe"); err != nil || c.RevokedAt != nil {
		t.Fatalf("certificate after a refused Revoke = %+v, %v; want unrevoked", c, err)
	}
	if revs, err := s.Revocations(ctx, "relay:up"); err != nil || len(revs) != 0 {
		t.Fatalf("revocations of relay:up = %+v, %v; want none", revs, err)
	}
}

// relayRevokeQueued: RevokeQueue queues one signer_revoke job on the
// profile's queue, which a second request and a key compromise join.
func relayRevokeQueued(t *testing.T, s store.Store, x Extras, a *store.Account) int64 {
	ctx := ctxT(t)
	id, err := s.RevokeQueue(ctx, "cafe", "upstream", 4, store.AuditEvent{Actor: "acme:" + a.ID, Action: "revoke", Subject: "cafe"})
	if err != nil {
		t.Fatal(err)
	}
	// Asked again while the job is outstanding: the same job, not a second.
	again, err := s.RevokeQueue(ctx, "cafe", "upstream", 4, store.AuditEvent{Actor: "acme:" + a.ID, Action: "revoke", Subject: "cafe"})
	if err != nil || again != id || id == 0 {
		t.Fatalf("RevokeQueue again while job %d is outstanding = job %d, %v; want the same job", id, again, err)
	}
	if n := x.Int(t, "SELECT count(*) FROM river_job WHERE kind = '"+jobs.KindSignerRevoke+"' AND queue = '"+jobs.ProfileQueue("upstream")+"'"); n != 1 {
		t.Fatalf("%d signer_revoke jobs on the upstream profile's queue, want 1", n)
	}
	// A key compromise reported while it waits joins it too, and the
	// backend is told keyCompromise, not the first request's reason.
	if r := revokeReasonOf(t, x, id); r != 4 {
		t.Fatalf("the queued job's reason = %d, want 4", r)
	}
	joined, err := s.RevokeQueue(ctx, "cafe", "upstream", store.ReasonKeyCompromise, store.AuditEvent{Actor: "acme:certificate-key", Action: "revoke", Subject: "cafe"})
	if err != nil || joined != id {
		t.Fatalf("RevokeQueue with reason 1 while job %d is outstanding = job %d, %v; want the same job", id, joined, err)
	}
	if r := revokeReasonOf(t, x, id); r != store.ReasonKeyCompromise {
		t.Fatalf("the queued job's reason after a key compromise joined it = %d, want 1", r)
	}
	return id
}

// revokeReasonOf is the reason signer_revoke job id carries.
func revokeReasonOf(t *testing.T, x Extras, id int64) int64 {
	q := fmt.Sprintf("SELECT (args->>'reason')::bigint FROM river_job WHERE id = %d", id)
	if x.Dialect == "sqlite" {
		q = fmt.Sprintf("SELECT json_extract(args, '$.reason') FROM river_job WHERE id = %d", id)
	}
	return x.Int(t, q)
}

// relayRevokeAnswered: job id's progress is nothing until the backend
// answers, then its refusal, then, once recorded, revoked.
func relayRevokeAnswered(t *testing.T, s store.Store, x Extras, id int64) {
	ctx := ctxT(t)
	if p, err := s.RevokeProgress(ctx, "cafe", id); err != nil || p.Revoked || p.Refused != nil {
		t.Fatalf("RevokeProgress before the backend answered = %+v, %v; want nothing yet", p, err)
	}
	// The backend's refusal, as River stores a job's recorded output (a
	// JSON text literal is JSONB to PostgreSQL's assignment and JSON to
	// SQLite's json functions alike).
	x.Exec(t, fmt.Sprintf(`UPDATE river_job SET metadata = '{"output": {"refused": {"type": "%s", "detail": "no"}}}' WHERE id = %d`, acme.ProblemUnauthorized, id))
	if p, err := s.RevokeProgress(ctx, "cafe", id); err != nil || p.Revoked || p.Refused == nil || p.Refused.Type != acme.ProblemUnauthorized || p.Refused.Detail != "no" {
		t.Fatalf("RevokeProgress after a refusal = %+v, %v; want the refusal", p, err)
	}
	if p, err := s.RevokeProgress(ctx, "cafe", id+1000); err != nil || p.Revoked || p.Refused != nil {
		t.Fatalf("RevokeProgress of another job = %+v, %v; want nothing: the refusal is job %d's", p, err, id)
	}
	if n, err := s.RevokedCount(ctx, "relay:up"); err != nil || n != 0 {
		t.Fatalf("RevokedCount(relay:up) before the backend's answer = %d, %v; want 0", n, err)
	}
	if err := s.RevokeRecorded(ctx, "cafe", 4, store.AuditEvent{Actor: "worker:1", Action: "revoke.backend"}); err != nil {
		t.Fatal(err)
	}
	// Revoked, with no revocation row: the count reads the certificates.
	if n, err := s.RevokedCount(ctx, "relay:up"); err != nil || n != 1 {
		t.Fatalf("RevokedCount(relay:up) = %d, %v; want 1", n, err)
	}
	if n, err := s.RevokedCount(ctx, "relay:other"); err != nil || n != 0 {
		t.Fatalf("RevokedCount(relay:other) = %d, %v; want 0", n, err)
	}
	if p, err := s.RevokeProgress(ctx, "cafe", id); err != nil || !p.Revoked {
		t.Fatalf("RevokeProgress after RevokeRecorded = %+v, %v; want revoked", p, err)
	}
	_, err := s.RevokeQueue(ctx, "cafe", "upstream", 4, store.AuditEvent{Actor: "x", Action: "revoke"})
	wantErr(t, "queueing revocation of a revoked certificate", err, store.ErrConflict)
}

func testCRLMonotonic(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	now := dbNow(t, s).Truncate(time.Second)
	crl := func(n int64) store.CRL {
		return store.CRL{IssuerID: "ca", Number: n, ThisUpdate: now, NextUpdate: now.Add(24 * time.Hour), DER: []byte{byte(n)}}
	}
	if n, err := s.CRLNextNumber(ctx, "ca", 0); err != nil || n != 1 {
		t.Fatalf("CRLNextNumber on none = %d, %v; want 1", n, err)
	}
	if err := s.CRLStore(ctx, crl(1)); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "storing number 1 again", s.CRLStore(ctx, crl(1)), store.ErrConflict)
	if err := s.CRLStore(ctx, crl(5)); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "storing a lower number", s.CRLStore(ctx, crl(3)), store.ErrConflict)
	if n, err := s.CRLNextNumber(ctx, "ca", 0); err != nil || n != 6 {
		t.Fatalf("CRLNextNumber = %d, %v; want 6", n, err)
	}
	latest, err := s.CRLLatest(ctx, "ca")
	if err != nil || latest.Number != 5 || !latest.ThisUpdate.Equal(now) || string(latest.DER) != "\x05" {
		t.Fatalf("CRLLatest = %+v, %v", latest, err)
	}
	if n, _ := s.CRLNextNumber(ctx, "other", 0); n != 1 {
		t.Fatalf("another issuer's next number is %d, want 1", n)
	}
}
