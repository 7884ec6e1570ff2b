package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// testUndeliveredRecord: a certificate signed for an order that could no
// longer take it is stored, never attached to its order. Hallmark's own
// issuer's is revoked at once with its revocation row and the issuer's
// next CRL queued; a relay's is left for its backend to revoke
// (signer_revoke on the profile's queue). Neither counts toward the
// certificates-per-domain limit, and a serial is recorded once.
func testUndeliveredRecord(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	now := dbNow(t, s)
	cases := []struct {
		serial, issuer, name string
		remote               bool
	}{
		{"ab01", "issuer-1", "undelivered.example.com", false},
		{"ab02", "relay:up", "undelivered-relay.example.com", true},
	}
	for _, tc := range cases {
		t.Run(tc.issuer, func(t *testing.T) {
			o := readyOrder(t, s, a, tc.name)
			if _, claimed, err := s.OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, o.Profile, []byte("csr"), nil); err != nil || !claimed {
				t.Fatalf("OrderFinalizeBegin: claimed=%v err=%v", claimed, err)
			}
			crlJobs, revokeJobs := jobCount(t, x, jobs.KindCRLGenerate), jobCount(t, x, jobs.KindSignerRevoke)
			c := store.Certificate{Serial: tc.serial, OrderID: o.ID, AccountID: a.ID, IssuerID: tc.issuer, Profile: "upstream",
				DER: []byte{0x30, 0x01}, ChainPEM: []byte("-----BEGIN CERTIFICATE-----\n"), Names: []string{tc.name},
				NotBefore: now, NotAfter: now.Add(90 * 24 * time.Hour)}
			ev := store.AuditEvent{Actor: "worker:test", Action: "certificate.undelivered", Subject: tc.serial}
			if err := s.UndeliveredRecord(ctx, c, 5, ev); err != nil {
				t.Fatalf("UndeliveredRecord: %v", err)
			}
			got, err := s.CertificateBySerial(ctx, tc.serial)
			if err != nil || got.OrderID != o.ID || got.AccountID != a.ID || got.IssuerID != tc.issuer {
				t.Fatalf("stored certificate = %+v, %v", got, err)
			}
			if ord := order(t, s, o.ID); ord.CertSerial != "" || ord.Status != acme.StatusProcessing {
				t.Fatalf("order after UndeliveredRecord: %s with %q; want it untouched", ord.Status, ord.CertSerial)
			}
			revs, err := s.Revocations(ctx, tc.issuer)
			if err != nil {
				t.Fatal(err)
			}
			if tc.remote {
				if got.RevokedAt != nil || len(revs) != 0 {
					t.Fatalf("relay certificate revoked here (%v, %d rows); want it left to its backend", got.RevokedAt, len(revs))
				}
				if n := x.Int(t, "SELECT count(*) FROM river_job WHERE kind = '"+jobs.KindSignerRevoke+"' AND queue = '"+jobs.ProfileQueue("upstream")+"'"); n != revokeJobs+1 {
					t.Fatalf("%d signer_revoke jobs on the profile's queue, want %d", n, revokeJobs+1)
				}
			} else {
				if got.RevokedAt == nil || got.RevocationReason != 5 || len(revs) != 1 || revs[0].Serial != tc.serial || revs[0].Reason != 5 {
					t.Fatalf("undelivered certificate: revoked %v reason %d, revocations %+v; want revoked with 5 and listed", got.RevokedAt, got.RevocationReason, revs)
				}
				if n := jobCount(t, x, jobs.KindCRLGenerate); n != crlJobs+1 {
					t.Fatalf("%d crl_generate jobs, want %d", n, crlJobs+1)
				}
			}
			if rc, err := s.RateCertificates(ctx, "example.com", time.Hour); err != nil || rc.Count != 0 {
				t.Fatalf("RateCertificates(example.com) = %+v, %v; an undelivered certificate counts for no one", rc, err)
			}
			iss, err := s.Issuers(ctx)
			if err != nil || !slices.Contains(iss, tc.issuer) {
				t.Fatalf("Issuers = %v, %v; want %s listed", iss, err, tc.issuer)
			}
			err = s.UndeliveredRecord(ctx, c, 5, ev)
			wantErr(t, "recording it again", err, store.ErrConflict)
		})
	}
}
