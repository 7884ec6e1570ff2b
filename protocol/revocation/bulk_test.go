package revocation_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/revocation"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// TestRevokeAll: a page of certificates as Select read it, revoked together,
// gives each certificate Revoke's outcome: local and pkcs11 ones revoked
// (in one store call), a relay's queued for its backend, one revoked when
// read or by someone else since alreadyRevoked (store.ErrConflict, with
// its revocation as it stands), one gone malformed (store.ErrNotFound).
func TestRevokeAll(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testdb.Open(t, dialect)
			a, err := db.Store.AccountCreate(ctx, &store.Account{KeyJWK: []byte(`{}`), Thumbprint: "tp", TermsAgreed: true})
			if err != nil {
				t.Fatal(err)
			}
			cases := []struct {
				serial, profile, issuer string
				before                  func(serial string) // after the page was read
				done, remote            bool
				err                     error // what Err wraps
				reason                  int   // the certificate's reason after
			}{
				{serial: "01", profile: "default", issuer: "iss", done: true, reason: 4},
				{serial: "02", profile: "hsm", issuer: "iss2", done: true, reason: 4},
				{serial: "03", profile: "up", issuer: "relay:corp", remote: true},
				{serial: "04", profile: "default", issuer: "iss", err: store.ErrConflict, reason: 1, before: func(serial string) {
					if _, err := db.Store.Revoke(ctx, serial, 1, store.AuditEvent{Actor: "admin:bob", Action: "revoke", Subject: serial}); err != nil {
						t.Fatal(err)
					}
				}},
				{serial: "05", profile: "default", issuer: "iss", done: true, reason: 4},
			}
			var page []*store.Certificate
			for _, tc := range cases {
				page = append(page, issued(t, db.Store, a.ID, tc.profile, tc.issuer, tc.serial, tc.serial+".example.com"))
			}
			gone := *page[0]
			gone.Serial = "ff" // read, then gone: not issued by this CA
			page = append(page, &gone)
			for _, tc := range cases {
				if tc.before != nil {
					tc.before(tc.serial)
				}
			}
			svc := revocation.New(db.Store, profiles)
			outs := svc.RevokeAll(ctx, page, revocation.Request{Reason: revocation.Superseded, Actor: "cli:test", Via: "test"})
			if len(outs) != len(page) {
				t.Fatalf("RevokeAll gave %d outcomes for %d certificates", len(outs), len(page))
			}
			for i, tc := range cases {
				o := outs[i]
				if o.Done != tc.done || o.Remote != tc.remote || !errors.Is(o.Err, tc.err) || (tc.err == nil) != (o.Err == nil) {
					t.Errorf("certificate %s: done %v remote %v err %v; want done %v remote %v err %v", tc.serial, o.Done, o.Remote, o.Err, tc.done, tc.remote, tc.err)
					continue
				}
				if tc.err != nil && acme.AsError(o.Err).Problem.Type != acme.ProblemAlreadyRevoked {
					t.Errorf("certificate %s: error %v is not alreadyRevoked", tc.serial, o.Err)
				}
				if tc.remote {
					continue
				}
				if o.Certificate == nil || o.Certificate.RevokedAt == nil || o.Certificate.RevocationReason != tc.reason {
					t.Errorf("certificate %s: outcome's certificate %+v, want revoked with reason %d", tc.serial, o.Certificate, tc.reason)
				}
			}
			if last := outs[len(outs)-1]; !errors.Is(last.Err, store.ErrNotFound) || acme.AsError(last.Err).Problem.Type != acme.ProblemMalformed {
				t.Errorf("a certificate gone since it was read: %v, want malformed wrapping store.ErrNotFound", last.Err)
			}
			for issuer, want := range map[string]int{"iss": 3, "iss2": 1, "relay:corp": 0} {
				if revs, err := db.Store.Revocations(ctx, issuer); err != nil || len(revs) != want {
					t.Errorf("revocations of %s = %d, %v; want %d", issuer, len(revs), err, want)
				}
			}
		})
	}
}
