package store_test

import (
	"context"
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

// crlShardsReader is a store of an issuer's newest CRL per shard and its
// revocations, for JudgeIssuerCRL.
type crlShardsReader struct {
	crls []*store.CRL
	revs []store.Revocation
}

func (r crlShardsReader) CRLShards(context.Context, string) ([]*store.CRL, error) { return r.crls, nil }
func (r crlShardsReader) Revocations(context.Context, string) ([]store.Revocation, error) {
	return r.revs, nil
}
func (r crlShardsReader) RevokedCount(context.Context, string) (int, error) { return len(r.revs), nil }

// TestJudgeIssuerCRL: an issuer's one line sums its shards: stale, naming
// the shard, when any shard is; the counts are every shard's.
func TestJudgeIssuerCRL(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	crl := func(shard int, serials ...string) *store.CRL {
		return &store.CRL{IssuerID: "i", Shard: shard, Number: 3, ThisUpdate: now.Add(-time.Minute), NextUpdate: now.Add(time.Hour),
			DER: harness.SignedCRL(t, now.Add(-time.Minute), serials...)}
	}
	revs := []store.Revocation{{Serial: "c01", IssuerID: "i", Reason: 1, Shard: 0}, {Serial: "c02", IssuerID: "i", Reason: 1, Shard: 2}}
	h, err := store.JudgeIssuerCRL(context.Background(), crlShardsReader{crls: []*store.CRL{crl(0, "c01:1"), crl(2)}, revs: revs}, "i", now)
	if err != nil || !h.Stale || h.Shard != 2 || h.Why != "shard 2: 1 revocation(s) not listed yet: a worker mounting this issuer signs the CRL that lists them" ||
		h.Revocations != 2 || h.Entries != 1 || h.Unlisted != 1 {
		t.Fatalf("JudgeIssuerCRL = %+v, %v; want stale by shard 2, 2 revocations, 1 entry, 1 unlisted", h, err)
	}
	h, err = store.JudgeIssuerCRL(context.Background(), crlShardsReader{crls: []*store.CRL{crl(0, "c01:1"), crl(2, "c02:1")}, revs: revs}, "i", now)
	if err != nil || h.Stale || h.Entries != 2 || h.Unlisted != 0 {
		t.Fatalf("JudgeIssuerCRL = %+v, %v; want fresh, 2 entries", h, err)
	}
}
