package cli

import (
	"context"
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
