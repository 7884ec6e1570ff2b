package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/tests/harness"
)

// TestCRLStatusComparesSerials: `crl status` calls a CRL fresh only when it
// lists every revocation's serial. A CRL whose thisUpdate is after a
// revocation but which does not list it — the revocation's transaction
// committed after the worker read the list, which PostgreSQL allows — is
// stale (exit 5): comparing times called it fresh.
func TestCRLStatusComparesSerials(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		for _, tc := range []struct {
			name     string
			lists    []string // the serials the CRL lists
			der      []byte   // instead of a signed CRL
			code     int
			entries  int
			unlisted int
			why      string
		}{
			{name: "a CRL after the revocation that does not list it", code: 5, entries: 0, unlisted: 1, why: "1 revocation(s) not listed yet: a worker mounting this issuer signs the CRL that lists them"},
			{name: "a CRL listing the serial without its leading zero", lists: []string{"c01"}, code: 0, entries: 1},
			{name: "a CRL listing another serial", lists: []string{"c02"}, code: 5, entries: 1, unlisted: 1, why: "1 revocation(s) not listed yet: a worker mounting this issuer signs the CRL that lists them"},
			{name: "a CRL that does not parse", der: []byte{0x30}, code: 5, entries: -1, unlisted: 1, why: "the newest CRL does not parse"},
		} {
			t.Run(d.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				c := newCA(t, d.url(t))
				ctx := context.Background()
				c.issued(c.account(), "gone.example.com", "0c01")
				rev, err := c.st().Revoke(ctx, "0c01", 0, store.AuditEvent{Actor: "test", Action: "revoke", Subject: "0c01"})
				if err != nil {
					t.Fatal(err)
				}
				this := rev.RevokedAt.Add(time.Second)
				der := tc.der
				if der == nil {
					der = harness.SignedCRL(t, this, tc.lists...)
				}
				if err := c.st().CRLStore(ctx, store.CRL{IssuerID: "issuer-1", Number: 1, ThisUpdate: this, NextUpdate: this.Add(24 * time.Hour), DER: der}); err != nil {
					t.Fatal(err)
				}
				var rows []struct {
					Issuer      string
					Entries     int
					Revocations int
					Unlisted    int
					Stale       bool
					Why         string
				}
				c.jsonOf(&rows, tc.code, "crl", "status", "--json")
				if len(rows) != 1 || rows[0].Entries != tc.entries || rows[0].Revocations != 1 || rows[0].Unlisted != tc.unlisted ||
					rows[0].Stale != (tc.code == 5) || rows[0].Why != tc.why {
					t.Fatalf("crl status = %+v; want entries %d, 1 revocation, %d unlisted, why %q", rows, tc.entries, tc.unlisted, tc.why)
				}
				c.want(tc.code, "crl", "status") // the table form agrees
			})
		}
	}
}

// TestCRLStatusShowsShards: `crl status` has a row per CRL shard with a CRL
// or an entry, each with its number, age and size, and exits 5 naming the
// one shard whose revocation no CRL lists yet.
func TestCRLStatusShowsShards(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			c := newCA(t, d.url(t))
			ctx := context.Background()
			// A certificate on shard 5, revoked; shard 5 has no CRL yet.
			o := c.processing(c.account(), "five.example.com")
			now, _ := c.st().Now(ctx)
			if err := c.st().OrderIssued(ctx, store.Issued{OrderID: o.ID, Certificate: store.Certificate{
				Serial: "0c05", IssuerID: "issuer-1", Profile: "default", DER: []byte{0x30, 0x01}, ChainPEM: []byte("-----BEGIN CERTIFICATE-----\n"),
				Names: []string{"five.example.com"}, NotBefore: now, NotAfter: now.Add(90 * 24 * time.Hour), CRLShard: 5,
			}}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.st().Revoke(ctx, "0c05", 4, store.AuditEvent{Actor: "test", Action: "revoke", Subject: "0c05"}); err != nil {
				t.Fatal(err)
			}
			this := now.Add(-time.Minute)
			der := harness.SignedCRL(t, this)
			if err := c.st().CRLStore(ctx, store.CRL{IssuerID: "issuer-1", Number: 3, ThisUpdate: this, NextUpdate: this.Add(24 * time.Hour), DER: der}); err != nil {
				t.Fatal(err)
			}
			var rows []struct {
				Issuer      string
				Shard       int
				Number      int64
				AgeSeconds  int64 `json:"age_seconds"`
				Bytes       int
				Revocations int
				Stale       bool
				Why         string
			}
			c.jsonOf(&rows, 5, "crl", "status", "--json")
			if len(rows) != 2 || rows[0].Shard != 0 || rows[0].Number != 3 || rows[0].Bytes != len(der) || rows[0].AgeSeconds < 50 || rows[0].Stale {
				t.Fatalf("crl status = %+v; want shard 0 fresh, number 3, %d bytes, about 60 s old, then shard 5", rows, len(der))
			}
			if rows[1].Shard != 5 || rows[1].Number != 0 || rows[1].Revocations != 1 || !rows[1].Stale || rows[1].Why != "no CRL signed yet; is a worker mounting this issuer running?" {
				t.Fatalf("crl status shard 5 = %+v; want stale, no CRL, 1 revocation", rows[1])
			}
			r := c.want(5, "crl", "status") // the table form agrees
			if !strings.Contains(r.stdout, "SHARD") || !strings.Contains(r.stdout, "BYTES") {
				t.Errorf("the table has no SHARD or BYTES column:\n%s", r.stdout)
			}
		})
	}
}
