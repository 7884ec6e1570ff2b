package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/store"
)

// testCRLShards: a certificate's CRL shard is stored with it and with its
// revocation; each shard's entries, CRLs and numbers are its own; and an
// entry leaves its shard once its certificate has expired and a stored CRL
// of the shard has listed it, not before either.
func testCRLShards(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	acct := newAccount(t, s)
	now := dbNow(t, s)
	for _, c := range []struct {
		serial string
		shard  int
		life   time.Duration
	}{{"5a00", 0, 90 * 24 * time.Hour}, {"5a21", 2, time.Hour}, {"5a22", 2, 90 * 24 * time.Hour}} {
		issueKeyed(t, s, acct, c.serial, "issuer-1", nil, now.Add(c.life))
		// The worker stores the shard with the certificate (OrderIssued,
		// TestCRLShardDropsExpiredEntry); here it is set as it would be.
		x.Exec(t, fmt.Sprintf("UPDATE certificates SET crl_shard = %d WHERE serial = '%s'", c.shard, c.serial))
	}
	if got, err := s.CertificateBySerial(ctx, "5a21"); err != nil || got.CRLShard != 2 {
		t.Fatalf("CertificateBySerial(5a21) = %+v, %v; want shard 2", got, err)
	}
	if _, err := s.RevokeMany(ctx, []string{"5a00", "5a21", "5a22"}, 4, store.AuditEvent{Actor: "test", Action: "revoke"}); err != nil {
		t.Fatal(err)
	}
	entries := func(shard int, at time.Time) map[string]bool {
		t.Helper()
		revs, err := s.CRLEntries(ctx, "issuer-1", shard, at)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, r := range revs {
			if r.Shard != shard || r.IssuerID != "issuer-1" || r.Reason != 4 {
				t.Fatalf("shard %d lists %+v", shard, r)
			}
			out[r.Serial] = r.Listed
		}
		return out
	}
	later := now.Add(2 * time.Hour) // 5a21 has expired
	if got := entries(0, now); len(got) != 1 || got["5a00"] {
		t.Fatalf("shard 0's entries = %v; want 5a00, unlisted", got)
	}
	if got := entries(2, later); len(got) != 2 {
		t.Fatalf("shard 2's entries after 5a21 expired, never listed = %v; want both: it stays until a CRL lists it", got)
	}
	crl := func(shard int, n int64, listed ...string) store.CRL {
		return store.CRL{IssuerID: "issuer-1", Shard: shard, Number: n, ThisUpdate: now, NextUpdate: now.Add(24 * time.Hour), DER: []byte{byte(n)}, Listed: listed}
	}
	if err := s.CRLStore(ctx, crl(2, 10, "5a21", "5a22")); err != nil {
		t.Fatal(err)
	}
	if got := entries(2, now); len(got) != 2 || !got["5a21"] || !got["5a22"] {
		t.Fatalf("shard 2's entries after CRL 10 listed them = %v; want both, listed", got)
	}
	if got := entries(2, later); len(got) != 1 || !got["5a22"] {
		t.Fatalf("shard 2's entries after 5a21 expired, listed = %v; want 5a22 alone", got)
	}
	// Numbers are per shard: shard 0 may store 5 after shard 2's 10.
	if err := s.CRLStore(ctx, crl(0, 5)); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "storing shard 2's number 10 again", s.CRLStore(ctx, crl(2, 10)), store.ErrConflict)
	if err := s.CRLStore(ctx, crl(2, 12)); err != nil {
		t.Fatal(err)
	}
	if n, err := s.CRLNextNumber(ctx, "issuer-1", 2); err != nil || n != 13 {
		t.Fatalf("CRLNextNumber(shard 2) = %d, %v; want 13", n, err)
	}
	if n, err := s.CRLNextNumber(ctx, "issuer-1", 0); err != nil || n != 6 {
		t.Fatalf("CRLNextNumber(shard 0) = %d, %v; want 6", n, err)
	}
	_, err := s.CRLShardLatest(ctx, "issuer-1", 1)
	wantErr(t, "CRLShardLatest of a shard with none", err, store.ErrNotFound)
	if c, err := s.CRLLatest(ctx, "issuer-1"); err != nil || c.Number != 5 || c.Shard != 0 {
		t.Fatalf("CRLLatest (shard 0) = %+v, %v; want number 5", c, err)
	}
	shards, err := s.CRLShards(ctx, "issuer-1")
	if err != nil || len(shards) != 2 || shards[0].Shard != 0 || shards[0].Number != 5 || shards[1].Shard != 2 || shards[1].Number != 12 {
		t.Fatalf("CRLShards = %v, %v; want shard 0's 5 and shard 2's 12", shards, err)
	}
}
