package storetest

import (
	"testing"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/store"
)

// testRevokeRecorded: a remote backend's revocation stamps the certificate,
// writes no CRL entry and no crl_generate job, and is refused the second
// time (a rescued job's handler sees the certificate revoked first).
func testRevokeRecorded(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	o := readyOrder(t, s, a, "remote.example.com")
	mustIssue(t, s, o, "f00d")
	ev := store.AuditEvent{Actor: "worker:w1", Action: "revoke", Subject: "f00d", Detail: "relay"}
	wantErr(t, "RevokeRecorded of an unknown serial", s.RevokeRecorded(ctx, "nope", 1, ev), store.ErrNotFound)

	if err := s.RevokeRecorded(ctx, "f00d", 1, ev); err != nil {
		t.Fatal(err)
	}
	c, err := s.CertificateBySerial(ctx, "f00d")
	if err != nil || c.RevokedAt == nil || c.RevocationReason != 1 {
		t.Fatalf("after RevokeRecorded: %+v, %v", c, err)
	}
	if revs, err := s.Revocations(ctx, c.IssuerID); err != nil || len(revs) != 0 {
		t.Fatalf("a remote revocation wrote CRL entries %v (%v)", revs, err)
	}
	if n := jobCount(t, x, jobs.KindCRLGenerate); n != 0 {
		t.Fatalf("%d crl_generate jobs after a remote revocation, want 0", n)
	}
	evs, _, err := s.AuditList(ctx, store.Page{})
	if err != nil || len(evs) != 1 || evs[0].Subject != "f00d" {
		t.Fatalf("audit = %+v, %v", evs, err)
	}
	wantErr(t, "recording twice", s.RevokeRecorded(ctx, "f00d", 4, ev), store.ErrConflict)
}
