package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/tests/harness"
)

// TestJudgeCRL: the one rule `hallmark crl status` and the admin panel
// show for an issuer's newest CRL.
func TestJudgeCRL(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	revs := []store.Revocation{{Serial: "0c01", RevokedAt: now.Add(-time.Hour), Reason: 1}}
	crl := func(next time.Duration, serials ...string) *store.CRL {
		return &store.CRL{IssuerID: "i", Number: 3, ThisUpdate: now.Add(-time.Minute), NextUpdate: now.Add(next),
			DER: harness.SignedCRL(t, now.Add(-time.Minute), serials...)}
	}
	tests := []struct {
		name     string
		issuer   string
		newest   *store.CRL
		revs     []store.Revocation
		stale    bool
		entries  int
		unlisted int
		why      string // a part of Why; "" for none
	}{
		{name: "lists every revocation", issuer: "i", newest: crl(time.Hour, "c01:1"), revs: revs, entries: 1},
		{name: "lists a revocation with the reason it had", issuer: "i", newest: crl(time.Hour, "c01:4"), revs: revs, stale: true, entries: 1, unlisted: 1, why: "1 revocation(s) not listed yet"},
		{name: "no revocations", issuer: "i", newest: crl(time.Hour), entries: 0},
		{name: "none signed", issuer: "i", revs: revs, stale: true, unlisted: 1, why: "no CRL signed yet"},
		{name: "none signed, no revocations", issuer: "i", stale: true, why: "no CRL signed yet"},
		{name: "a revocation not listed", issuer: "i", newest: crl(time.Hour), revs: revs, stale: true, unlisted: 1, why: "1 revocation(s) not listed yet"},
		{name: "past nextUpdate", issuer: "i", newest: crl(-time.Second, "c01:1"), revs: revs, stale: true, entries: 1, why: "past nextUpdate"},
		{name: "does not parse", issuer: "i", newest: &store.CRL{IssuerID: "i", NextUpdate: now.Add(time.Hour), DER: []byte{0x30}}, revs: revs, stale: true, entries: -1, unlisted: 1, why: "does not parse"},
		{name: "a relay's issuer", issuer: "relay:upstream", revs: revs, why: "publishes its own revocation status"},
		{name: "a custom backend's issuer", issuer: "custom:hooks", why: "publishes its own revocation status"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := store.JudgeCRL(tc.issuer, tc.newest, tc.revs, now)
			if h.Stale != tc.stale || h.Entries != tc.entries || h.Unlisted != tc.unlisted || h.Revocations != len(tc.revs) ||
				(tc.why == "") != (h.Why == "") || !strings.Contains(h.Why, tc.why) {
				t.Errorf("JudgeCRL = %+v; want stale %v, %d entries, %d unlisted, why containing %q", h, tc.stale, tc.entries, tc.unlisted, tc.why)
			}
		})
	}
}
