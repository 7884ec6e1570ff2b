package worker

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/big"
	"strconv"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/store"
)

// generateCRL runs one crl_generate job: in the shard's turn on this
// worker and under the shard's lease (so one job at a time signs it, and a
// CRL's number and its list of revocations are read together), it signs
// the shard's next CRL with every entry it lists and stores it. Jobs
// coalesce here: when the shard's newest CRL already lists every entry and
// is fresh, there is nothing to do.
func (w *Worker) generateCRL(ctx context.Context, job jobs.Job[jobs.CRLGenerateArgs]) error {
	args := job.Args
	iss, turn, ok := w.crlIssuer(args.IssuerID, args.Shard)
	if !ok {
		return jobs.CouldNotRun(fmt.Errorf("issuer %s is not mounted on worker %s", args.IssuerID, w.id))
	}
	select {
	case turn <- struct{}{}:
		defer func() { <-turn }()
	case <-ctx.Done():
		return jobs.CouldNotRun(fmt.Errorf("waiting for this worker's other CRL job for %s shard %d: %w", args.IssuerID, args.Shard, ctx.Err()))
	}
	lease := crlLeaseName(args.IssuerID, args.Shard)
	got, err := w.st.crls.TryLock(ctx, lease, w.id, w.crlLease)
	if err != nil {
		return jobs.CouldNotRun(fmt.Errorf("leasing %s: %w", lease, err))
	}
	if !got {
		// Another worker is signing this shard's CRL right now; come back
		// after it, so a revocation it may have missed is covered.
		return jobs.CouldNotRun(fmt.Errorf("lease %s is held by another worker", lease))
	}
	defer func() { _ = w.st.crls.Unlock(context.WithoutCancel(ctx), lease, w.id) }()
	return w.signShard(ctx, iss, args.IssuerID, args.Shard)
}

// signShard signs and stores the shard's next CRL, under its lease, unless
// its newest is fresh and lists every entry.
func (w *Worker) signShard(ctx context.Context, iss CRLSigner, issuerID string, shard int) error {
	now, err := w.st.crls.Now(ctx)
	if err != nil {
		return jobs.CouldNotRun(fmt.Errorf("reading the database clock: %w", err))
	}
	revs, err := w.st.crls.CRLEntries(ctx, issuerID, shard, now)
	if err != nil {
		return jobs.CouldNotRun(fmt.Errorf("listing revocations of %s shard %d: %w", issuerID, shard, err))
	}
	latest, err := w.st.crls.CRLShardLatest(ctx, issuerID, shard)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return jobs.CouldNotRun(fmt.Errorf("loading the newest CRL of %s shard %d: %w", issuerID, shard, err))
	}
	// The subject is the shard's newest CRL, checked under the lease so no
	// other worker signs meanwhile. A rescued job whose worker died after
	// CRLStore committed finds that CRL here and returns nil.
	if latest != nil && listsExactly(latest, revs) && now.Before(latest.NextUpdate.Add(-w.crlValidity/2)) {
		return nil
	}
	next, err := w.st.crls.CRLNextNumber(ctx, issuerID, shard)
	if err != nil {
		return jobs.CouldNotRun(fmt.Errorf("numbering the next CRL of %s shard %d: %w", issuerID, shard, err))
	}
	entries, listed := w.crlEntries(ctx, revs)
	// thisUpdate is the database's now: a revocation time after it would
	// make the CRL claim to predate an entry it lists (RFC 5280 §5.1.2.4).
	thisUpdate := now
	for _, e := range entries {
		if e.RevokedAt.After(thisUpdate) {
			thisUpdate = e.RevokedAt
		}
	}
	number := crlNumber(next, thisUpdate)
	nextUpdate := thisUpdate.Add(w.crlValidity)
	der, err := iss.SignCRL(number, thisUpdate, nextUpdate, entries, w.crlURL(issuerID, shard))
	if errors.Is(err, signer.ErrUnavailable) {
		return jobs.CouldNotRun(fmt.Errorf("signing CRL %d of %s shard %d: %w", number, issuerID, shard, err))
	}
	if err != nil {
		return fmt.Errorf("signing CRL %d of %s shard %d: %w", number, issuerID, shard, err)
	}
	err = w.st.crls.CRLStore(ctx, store.CRL{IssuerID: issuerID, Shard: shard, Number: number, ThisUpdate: thisUpdate, NextUpdate: nextUpdate, DER: der, Listed: listed})
	if err != nil {
		return jobs.CouldNotRun(fmt.Errorf("storing CRL %d of %s shard %d: %w", number, issuerID, shard, err))
	}
	w.log.InfoContext(ctx, "CRL signed", "issuer", issuerID, "shard", shard, "number", number, "entries", len(entries), "bytes", len(der))
	return nil
}

// crlEntries are revs as CRL entries, and the serials of those no stored
// CRL has listed yet (CRLStore marks them, so they may leave the shard
// once expired).
func (w *Worker) crlEntries(ctx context.Context, revs []store.Revocation) ([]signer.RevokedEntry, []string) {
	entries := make([]signer.RevokedEntry, 0, len(revs))
	var listed []string
	for _, r := range revs {
		serial, ok := new(big.Int).SetString(r.Serial, 16)
		if !ok {
			w.log.ErrorContext(ctx, "revocation with an unparseable serial left off the CRL", "serial", r.Serial)
			continue
		}
		entries = append(entries, signer.RevokedEntry{Serial: serial, RevokedAt: r.RevokedAt, Reason: r.Reason})
		if !r.Listed {
			listed = append(listed, r.Serial)
		}
	}
	return entries, listed
}

// crlURL is where the issuer's shard is published, written into its
// certificates' CRL distribution point and its CRLs' issuingDistributionPoint:
// shard 0 at the unsharded URL, which certificates issued before sharding
// name, the others below it.
func (w *Worker) crlURL(issuerID string, shard int) string {
	if shard == 0 {
		return w.urlBase + "/crl/" + issuerID
	}
	return w.urlBase + "/crl/" + issuerID + "/" + strconv.Itoa(shard)
}

// crlLeaseName is the lease one shard's CRL is signed under; shard 0 keeps
// the unsharded name, so a worker of an older release still excludes it.
func crlLeaseName(issuerID string, shard int) string {
	if shard == 0 {
		return "crl:" + issuerID
	}
	return "crl:" + issuerID + ":" + strconv.Itoa(shard)
}

func crlShardKey(issuerID string, shard int) string { return issuerID + "/" + strconv.Itoa(shard) }

// addCRLShards records that this worker signs n CRL shards of the issuer,
// each with its turn; the caller holds issuersMu or is New.
func (w *Worker) addCRLShards(issuerID string, n int) {
	w.crlShards[issuerID] = n
	for shard := range n {
		w.crlTurn[crlShardKey(issuerID, shard)] = make(chan struct{}, 1)
	}
}

// crlShardOf is the shard a certificate of order orderID is listed on, of
// n: chosen at issuance from the order's random ID, so the shards fill
// evenly, and stored with the certificate.
func crlShardOf(orderID string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(orderID))
	return int(h.Sum32() % uint32(n))
}

// crlNumber is the number of a CRL whose thisUpdate is given and whose
// issuer's stored numbering would go on at next: thisUpdate in
// nanoseconds since 1970, as Boulder numbers its CRLs, or next when the
// stored numbering is already past that (the database's clock stepped
// back). RFC 5280 §5.2.3 requires each issuer's numbers to increase. A
// count kept only in the database would start again, repeating numbers
// relying parties already hold, when the database is restored from a
// backup or created afresh beside a key that was kept (a PKCS#11 token
// outlives its database); the time does not.
func crlNumber(next int64, thisUpdate time.Time) int64 {
	return max(next, thisUpdate.UnixNano())
}

// listsExactly reports whether crl lists every entry of revs and nothing
// else (an entry that has left the shard makes it stale). It compares
// serials, not times: a revocation whose transaction committed after the
// CRL read the list may carry an earlier timestamp.
func listsExactly(crl *store.CRL, revs []store.Revocation) bool {
	l, err := crl.Unlisted(revs)
	return err == nil && l.Entries == len(revs) && len(l.Unlisted) == 0
}

// keySweepSince is how far back housekeeping looks for blocked keys whose
// certificates a block could not see: longer than any certificate may take
// from the worker's read of its order to its store (a job's retries
// included), and the Baseline Requirements' 24 hours to revoke.
// keySweepMargin is how long before a key's block such a certificate may
// have been stored and still not be seen by the block's search: the two
// transactions overlap, and each takes the time it started at.
const (
	keySweepSince  = 24 * time.Hour
	keySweepMargin = time.Minute
)

// keyHashBatch certificates are hashed in a transaction, at most
// keyHashBatches times a housekeeping run (every minute): a million
// certificates stored before migration 0012 take under four hours.
const (
	keyHashBatch   = 1000
	keyHashBatches = 5
)

// trailPruneBatch trail events are deleted in a transaction, at most
// trailPruneBatches times a housekeeping run (every minute): 36 million a
// day, far beyond any CA's issuance.
const (
	trailPruneBatch   = 5000
	trailPruneBatches = 5
)

// pruneTrail deletes the issuance trail's events older than
// audit.retention_days (none when it is 0), oldest first.
func (w *Worker) pruneTrail(ctx context.Context, now time.Time) {
	if w.retention <= 0 {
		return
	}
	var total int64
	for range trailPruneBatches {
		n, err := w.st.housekeep.AuditPrune(ctx, now.Add(-w.retention), trailPruneBatch)
		if err != nil {
			w.log.WarnContext(ctx, "deleting trail events past audit.retention_days", "err", err)
			break
		}
		total += n
		if n < trailPruneBatch {
			break
		}
	}
	if total > 0 {
		w.log.InfoContext(ctx, "trail events past audit.retention_days deleted", "count", total, "retention_days", int(w.retention/(24*time.Hour)))
	}
}

// housekeeping runs the periodic sweeps. Each sweep's failure is logged and
// the others still run; the job itself never fails a subject.
// heartbeatKept is how long a lapsed worker's heartbeat row is kept: far
// longer than any live worker takes to rescue its jobs.
const heartbeatKept = 24 * time.Hour

func (w *Worker) housekeeping(ctx context.Context, _ jobs.Job[jobs.HousekeepingArgs]) error {
	// One worker sweeps at a time (River's leader may change and enqueue
	// twice); a dead holder's lease expires on the database clock.
	if got, err := w.st.housekeep.TryLock(ctx, "housekeeping", w.id, time.Minute); err != nil {
		return jobs.CouldNotRun(fmt.Errorf("leasing housekeeping: %w", err))
	} else if !got {
		return nil // another worker is sweeping now
	}
	defer func() { _ = w.st.housekeep.Unlock(context.WithoutCancel(ctx), "housekeeping", w.id) }()
	if n, err := w.st.housekeep.NonceGC(ctx); err != nil {
		w.log.WarnContext(ctx, "nonce GC", "err", err)
	} else if n > 0 {
		w.log.InfoContext(ctx, "nonces forgotten", "count", n)
	}
	if n, err := w.st.housekeep.ExpirePending(ctx); err != nil {
		w.log.WarnContext(ctx, "expiring pending objects", "err", err)
	} else if n > 0 {
		w.log.InfoContext(ctx, "pending objects expired", "count", n)
	}
	now, err := w.st.housekeep.Now(ctx)
	if err != nil {
		return jobs.CouldNotRun(fmt.Errorf("reading the database clock: %w", err))
	}
	// A certificate stored just after its key was blocked, whose order was
	// read for signing just before (BR §4.9.1.1: revoked within 24 hours):
	// the block's own search could not see it.
	if r, err := w.st.housekeep.KeySweep(ctx, now.Add(-keySweepSince), keySweepMargin); err != nil {
		w.log.WarnContext(ctx, "sweeping the certificates of keys blocked lately", "err", err)
	} else if n := len(r.Revoked) + len(r.Queued); n > 0 {
		w.log.WarnContext(ctx, "certificates stored after their key was blocked, revoked (keyCompromise)", "count", n)
	}
	// Certificates stored before migration 0012 get their key hash, so a
	// key reported compromised finds them too: a few thousand a run, each
	// batch its own transaction, until none is left.
	for i := 0; i < keyHashBatches; i++ {
		n, r, err := w.st.housekeep.KeyHashBackfill(ctx, keyHashBatch)
		if err != nil {
			w.log.WarnContext(ctx, "recording the key hashes of older certificates", "err", err)
			break
		}
		if n > 0 {
			w.log.InfoContext(ctx, "older certificates given their key hash", "count", n)
		}
		if m := len(r.Revoked) + len(r.Queued); m > 0 {
			w.log.WarnContext(ctx, "older certificates of keys blocked before their hash was recorded, revoked (keyCompromise)", "count", m)
		}
		if n < keyHashBatch {
			break
		}
	}
	w.pruneTrail(ctx, now)
	w.notifyExpiring(ctx)
	if n, err := w.st.housekeep.HeartbeatGC(ctx, now.Add(-heartbeatKept)); err != nil {
		w.log.WarnContext(ctx, "deleting old worker heartbeats", "err", err)
	} else if n > 0 {
		w.log.InfoContext(ctx, "heartbeats of workers gone a day deleted", "count", n)
	}
	// A subject processing for longer than a job may take plus the rescue
	// time, with no outstanding job, was stranded (its job was lost); one
	// stranded after giveUpAfter of trying is abandoned.
	requeued, abandoned, err := jobs.Recover(ctx, w.st.housekeep, now.Add(-w.strandedAfter), now.Add(-w.giveUpAfter))
	if err != nil {
		w.log.WarnContext(ctx, "recovering stranded subjects", "err", err)
	}
	if requeued > 0 {
		w.log.InfoContext(ctx, "stranded subjects re-queued", "count", requeued)
	}
	if abandoned > 0 {
		w.log.WarnContext(ctx, "subjects stranded again and again abandoned; their clients see serverInternal", "count", abandoned, "processing_for_over", w.giveUpAfter)
	}
	return nil
}
