package storetest

import (
	"slices"
	"testing"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/store"
)

// testAdminViews: the overview's counts, the queue depth and the job pages
// agree with what the operations did (one issued and revoked certificate,
// its crl_generate job waiting).
func testAdminViews(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	c, err := s.Counts(ctx)
	if err != nil || c.Certificates != 0 || len(c.Accounts) != 0 || len(c.Orders) != 0 {
		t.Fatalf("Counts of an empty store = %+v, %v", c, err)
	}
	a := newAccount(t, s)
	newAccount(t, s)
	o := readyOrder(t, s, a, "views.example.com")
	if _, err := s.OrderCreate(ctx, store.SignedUse{}, orderSpec(t, s, a, "pending.example.com")); err != nil {
		t.Fatal(err)
	}
	mustIssue(t, s, o, "cafe")
	if _, err := s.Revoke(ctx, "cafe", 4, store.AuditEvent{Actor: "admin:test", Action: "revoke", Subject: "cafe"}); err != nil {
		t.Fatal(err)
	}
	c, err = s.Counts(ctx)
	if err != nil || c.Accounts["valid"] != 2 || c.Orders["valid"] != 1 || c.Orders["pending"] != 1 || c.Certificates != 1 || c.Revoked != 1 || c.Expired != 0 {
		t.Fatalf("Counts = %+v, %v; want 2 valid accounts, 1 valid and 1 pending order, 1 certificate revoked", c, err)
	}

	d, err := s.QueueDepth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(d.Rows, store.QueueCount{Kind: jobs.KindCRLGenerate, State: "available", Count: 1}) {
		t.Fatalf("QueueDepth rows %+v lack one available crl_generate", d.Rows)
	}
	crlJobs, next, err := s.JobIDs(ctx, store.JobFilter{Kind: jobs.KindCRLGenerate, State: "available"}, store.Page{})
	if err != nil || len(crlJobs) != 1 || next != "" {
		t.Fatalf("JobIDs(crl_generate, available) = %v %q %v", crlJobs, next, err)
	}
	if d.OldestWaitingID == 0 || d.OldestWaitingID > crlJobs[0] {
		t.Fatalf("OldestWaitingID = %d, want a waiting job no newer than %d", d.OldestWaitingID, crlJobs[0])
	}
	if ids, _, err := s.JobIDs(ctx, store.JobFilter{Kind: jobs.KindCRLGenerate, State: "completed"}, store.Page{}); err != nil || len(ids) != 0 {
		t.Fatalf("JobIDs(crl_generate, completed) = %v, %v; want none", ids, err)
	}
	// A state River does not have matches no job, as any other filter
	// would (on PostgreSQL the column is River's enum type, which refuses
	// a name it does not have).
	if ids, _, err := s.JobIDs(ctx, store.JobFilter{State: "bogus"}, store.Page{}); err != nil || len(ids) != 0 {
		t.Fatalf("JobIDs(state bogus) = %v, %v; want none", ids, err)
	}

	// Paging one at a time walks the same ids, newest first.
	all, _, err := s.JobIDs(ctx, store.JobFilter{}, store.Page{Limit: 1000})
	if err != nil || len(all) < 2 || !slices.IsSortedFunc(all, func(a, b int64) int { return int(b - a) }) {
		t.Fatalf("JobIDs = %v, %v; want at least two, newest first", all, err)
	}
	var walked []int64
	after := ""
	for range len(all) + 1 {
		ids, next, err := s.JobIDs(ctx, store.JobFilter{}, store.Page{After: after, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		walked = append(walked, ids...)
		if next == "" {
			break
		}
		after = next
	}
	if !slices.Equal(walked, all) {
		t.Fatalf("paging by one walked %v, want %v", walked, all)
	}

	if err := s.IssuerPublish(ctx, "published-only", []byte{0x30, 0x00}); err != nil {
		t.Fatal(err)
	}
	iss, err := s.Issuers(ctx)
	cert, _ := s.CertificateBySerial(ctx, "cafe")
	if err != nil || !slices.Contains(iss, "published-only") || !slices.Contains(iss, cert.IssuerID) || !slices.IsSorted(iss) {
		t.Fatalf("Issuers = %v, %v; want the published one and %q, sorted", iss, err, cert.IssuerID)
	}
}
