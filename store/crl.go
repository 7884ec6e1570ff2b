package store

import (
	"context"
	"crypto/x509"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"
)

// CRLListing is what an issuer's newest CRL says about its revocations.
type CRLListing struct {
	// Entries is the number of revoked certificates the CRL lists.
	Entries int
	// Unlisted are the serials of revocations the CRL does not list as
	// they stand: a worker has not signed the CRL that lists them yet, or
	// the one that lists the reason a revocation has now (keyCompromise,
	// reported after another reason: RevokeForKeyCompromise).
	Unlisted []string
}

// Unlisted reads the CRL's DER and reports which of revs it does not list
// with their reason. It compares serials and reasons, not times: on
// PostgreSQL a revocation whose transaction committed after the worker
// read the list can carry a revoked_at earlier than the CRL's thisUpdate
// and still be in no CRL. The
// worker asks it before deciding a CRL is current; `hallmark crl status`
// and the admin panel before calling one fresh. A CRL that does not parse
// is an error; every revocation is then unlisted.
func (c *CRL) Unlisted(revs []Revocation) (CRLListing, error) {
	rl, err := x509.ParseRevocationList(c.DER)
	if err != nil {
		return CRLListing{}, fmt.Errorf("parsing CRL %d of issuer %s: %w", c.Number, c.IssuerID, err)
	}
	listed := make(map[string]int, len(rl.RevokedCertificateEntries)) // serial → reason
	for _, e := range rl.RevokedCertificateEntries {
		if e.SerialNumber != nil {
			listed[e.SerialNumber.Text(16)] = e.ReasonCode
		}
	}
	out := CRLListing{Entries: len(rl.RevokedCertificateEntries), Unlisted: []string{}}
	for _, r := range revs {
		// Stored serials are hex, possibly with leading zeros ("0c01");
		// the CRL holds the integer.
		n, ok := new(big.Int).SetString(r.Serial, 16)
		if !ok {
			out.Unlisted = append(out.Unlisted, r.Serial)
			continue
		}
		if reason, ok := listed[n.Text(16)]; !ok || reason != r.Reason {
			out.Unlisted = append(out.Unlisted, r.Serial)
		}
	}
	return out, nil
}

// RemoteIssuer reports whether issuerID is a backend's that publishes its
// own revocation status: relay:<name> (the upstream CA's CRLs) and
// custom:<name> (the operator's hooks), as docs/backends.md lists the
// issuer ids in rows. Hallmark signs no CRL for it, so it has none to be
// stale.
func RemoteIssuer(issuerID string) bool {
	return strings.HasPrefix(issuerID, "relay:") || strings.HasPrefix(issuerID, "custom:")
}

// CRLHealth is the newest CRL of an issuer's shard judged against the
// shard's entries at a moment: the one rule `hallmark crl status` and the
// admin panel's CRL page both show, so an operator never reads "fresh" in
// one and "stale" in the other.
type CRLHealth struct {
	Issuer      string
	Shard       int
	Newest      *CRL // nil when none is stored
	Revocations int
	// Entries is the newest CRL's count of revoked certificates; -1 when
	// it does not parse.
	Entries int
	// Unlisted counts the revocations whose serial the newest CRL does
	// not list.
	Unlisted int
	Stale    bool
	// Why says why the CRL is stale, or what else an operator should know
	// of it; "" for a fresh CRL.
	Why string
}

// Bytes is the size of the shard's newest CRL, what a relying party
// downloads; 0 when there is none.
func (h CRLHealth) Bytes() int {
	if h.Newest == nil {
		return 0
	}
	return len(h.Newest.DER)
}

// CRLReader is what JudgeIssuerCRLs reads of the store.
type CRLReader interface {
	CRLShards(ctx context.Context, issuerID string) ([]*CRL, error)
	Revocations(ctx context.Context, issuerID string) ([]Revocation, error)
	RevokedCount(ctx context.Context, issuerID string) (int, error)
}

// JudgeIssuerCRLs reads the newest CRL of each of issuerID's shards and its
// entries from r and judges each shard (JudgeCRL): what `hallmark crl
// status` and the admin panel's CRL page show, one per shard that has a CRL
// or an entry, by shard, shard 0 always. A relay's or custom backend's
// issuer has no revocation rows; its count is its revoked certificates'.
func JudgeIssuerCRLs(ctx context.Context, r CRLReader, issuerID string, now time.Time) ([]CRLHealth, error) {
	crls, err := r.CRLShards(ctx, issuerID)
	if err != nil {
		return nil, err
	}
	revs, err := r.Revocations(ctx, issuerID)
	if err != nil {
		return nil, err
	}
	newest := map[int]*CRL{}
	byShard := map[int][]Revocation{0: nil}
	for _, c := range crls {
		newest[c.Shard] = c
		if _, ok := byShard[c.Shard]; !ok {
			byShard[c.Shard] = nil
		}
	}
	for _, rv := range revs {
		byShard[rv.Shard] = append(byShard[rv.Shard], rv)
	}
	out := make([]CRLHealth, 0, len(byShard))
	for shard, rs := range byShard {
		h := JudgeCRL(issuerID, newest[shard], rs, now)
		h.Shard = shard
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b CRLHealth) int { return a.Shard - b.Shard })
	if RemoteIssuer(issuerID) {
		if out[0].Revocations, err = r.RevokedCount(ctx, issuerID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// JudgeIssuerCRL sums JudgeIssuerCRLs up into one judgement per issuer,
// for a line per issuer: the first stale shard's (its Why naming the
// shard), else the shard whose newest CRL is oldest; the counts are the
// issuer's.
func JudgeIssuerCRL(ctx context.Context, r CRLReader, issuerID string, now time.Time) (CRLHealth, error) {
	shards, err := JudgeIssuerCRLs(ctx, r, issuerID, now)
	if err != nil {
		return CRLHealth{}, err
	}
	pick := 0
	for i, h := range shards {
		if h.Stale {
			pick = i
			break
		}
		if h.Newest != nil && shards[pick].Newest != nil && h.Newest.ThisUpdate.Before(shards[pick].Newest.ThisUpdate) {
			pick = i
		}
	}
	out := shards[pick]
	if out.Stale && len(shards) > 1 {
		out.Why = fmt.Sprintf("shard %d: %s", out.Shard, out.Why)
	}
	out.Revocations, out.Entries, out.Unlisted = 0, 0, 0
	for _, h := range shards {
		out.Revocations += h.Revocations
		out.Unlisted += h.Unlisted
		if out.Entries >= 0 && h.Entries >= 0 {
			out.Entries += h.Entries
		} else {
			out.Entries = -1
		}
	}
	return out, nil
}

// JudgeCRL judges issuerID's newest CRL (nil for none) against its
// revocations at now. A CRL is stale when there is none, when it does not
// parse, when its nextUpdate has passed, or when a revocation's serial is
// not in it (a worker signs a CRL after every revocation, so this lasts
// seconds unless no worker mounts the issuer).
func JudgeCRL(issuerID string, newest *CRL, revs []Revocation, now time.Time) CRLHealth {
	h := CRLHealth{Issuer: issuerID, Newest: newest, Revocations: len(revs), Unlisted: len(revs)}
	if RemoteIssuer(issuerID) && newest == nil {
		h.Unlisted = 0
		h.Why = "its backend publishes its own revocation status; Hallmark signs no CRL for it"
		return h
	}
	if newest == nil {
		h.Stale, h.Why = true, "no CRL signed yet; is a worker mounting this issuer running?"
		return h
	}
	l, err := newest.Unlisted(revs)
	if err != nil {
		h.Entries = -1
		h.Stale, h.Why = true, "the newest CRL does not parse"
		return h
	}
	h.Entries, h.Unlisted = l.Entries, len(l.Unlisted)
	switch {
	case now.After(newest.NextUpdate):
		h.Stale, h.Why = true, "past nextUpdate: relying parties will reject it"
	case h.Unlisted > 0:
		h.Stale, h.Why = true, fmt.Sprintf("%d revocation(s) not listed yet: a worker mounting this issuer signs the CRL that lists them", h.Unlisted)
	}
	return h
}
