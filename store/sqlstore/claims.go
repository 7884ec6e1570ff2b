package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/riverqueue/river"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/store"
)

// errLost ends a claim's transaction when its compare-and-swap moved
// nothing, rolling back the job queued with it.
var errLost = errors.New("the compare-and-swap moved nothing")

// claim runs a compare-and-swap (swap: one UPDATE ... RETURNING, scanning
// the row it moved) with job queued in the same transaction, after u's
// checks when u carries a nonce (signedChecks). River's insert is queued
// before the swap's result is known, so that all go in one round trip,
// with the COMMIT on PostgreSQL (sendClaim); won is false, and the job and
// the nonce rolled back, when a check or the swap moved nothing. moved
// runs on the row the swap returned, after the COMMIT where it went with
// the insert: it reads the row, and cannot refuse the claim. A condition
// of the claim belongs in the swap's WHERE.
func (s *Store) claim(ctx context.Context, u store.SignedUse, swap *batch, job river.JobArgs, moved func() error) (won bool, err error) {
	b, release, ok := s.signedChecks(u)
	if !ok {
		return false, nil
	}
	b.stmts, b.what = append(b.stmts, swap.stmts...), append(b.what, swap.what...)
	var opts river.InsertOpts
	if o, ok := job.(river.JobArgsWithInsertOpts); ok {
		opts = o.InsertOpts()
	}
	err = s.inTx(ctx, func(t *txn) error {
		n, err := t.sendClaim(ctx, &b, opts.Queue, func() error { return s.enqueue(ctx, t, job) })
		if err != nil {
			return err
		}
		if slices.Contains(n, 0) { // n: the checks' and the swap's counts
			return errLost
		}
		return moved()
	})
	if err != nil {
		release() // nothing committed
	}
	if errors.Is(err, errLost) {
		return false, nil
	}
	return err == nil, err
}

// signedChecks is a claim's batch up to its swap: with a nonce in u, two
// checks that must each hold, which sendClaim fails the transaction on
// when either finds nothing:
//  1. the nonce, consumed as NonceConsume does: of the current epoch and
//     not consumed before (on SQLite in memory, here: release gives it
//     back when the claim commits nothing, lost or failed);
//  2. the account, still valid with the key the request verified with.
//
// ok is false when the claim cannot hold: a nonce refused on SQLite, or
// text PostgreSQL cannot hold (no row has it). Without a nonce the batch
// is empty: the caller consumed it before.
func (s *Store) signedChecks(u store.SignedUse) (b batch, release func(), ok bool) {
	release = func() {}
	if u.Nonce.Nonce == "" {
		return b, release, true
	}
	if !store.Storable(u.AccountID) || !store.Storable(u.Nonce.Nonce) {
		return b, release, false
	}
	var one int
	if s.mem != nil {
		if fresh, _ := s.mem.consume(u.Nonce.Nonce, u.Nonce.Epoch, u.Nonce.Expires, time.Now()); !fresh {
			return b, release, false
		}
		release = func() { s.mem.release(u.Nonce.Nonce) }
	} else {
		b.scan("", []any{&one}, `INSERT INTO nonces_consumed (nonce, expires_at)
SELECT $1, $2 FROM nonce_epoch WHERE id = 1 AND epoch = $3
ON CONFLICT (nonce) DO NOTHING
RETURNING 1`, u.Nonce.Nonce, u.Nonce.Expires.UTC(), u.Nonce.Epoch)
	}
	b.scan("", []any{&one}, `SELECT 1 FROM accounts WHERE id = $1 AND status = 'valid' AND key_jwk = $2`,
		u.AccountID, string(u.KeyJWK))
	return b, release, true
}

// The compare-and-swaps of the issuance path (challengeClaimSQL and the
// statements after it) name their row by its key and test its status as an
// expression no index answers (status || ''). The statuses they test have
// partial indexes (orders_processing_idx, orders_open_expires_idx,
// challenges_processing_idx, authorizations_pending_expires_idx), and with
// statistics taken before a backlog built up (autovacuum's threshold is a
// tenth of the table; with it off, statistics are as old as the last
// ANALYZE) PostgreSQL took such an index for nearly empty and chose it over
// the key: each swap read the whole backlog, 10,000 rows and 7–18 ms, so
// draining it took time quadratic in its size (TestBacklogPlans).

// challengeClaimSQL is ChallengeClaim's swap, less its RETURNING columns:
// $1 the challenge, whose authorization must still be pending and
// unexpired on the database clock, and account $2's unless $2 is empty.
// The authorization is the challenge's own, found by its key: its account
// and status are hidden from index choice (concatenated with an empty
// string), or PostgreSQL chose authorizations_account_status_idx and
// walked every pending authorization of the account for each challenge
// POST, thousands for a fleet's account (never analyzed; custom and
// generic plans; TestFleetPlans).
const challengeClaimSQL = `UPDATE challenges SET status = 'processing', updated_at = {now}
WHERE id = $1 AND status || '' = 'pending'
  AND EXISTS (SELECT 1 FROM authorizations a WHERE a.id = challenges.authz_id AND (a.account_id || '' = $2 OR $2 = '') AND a.status || '' = 'pending' AND a.expires_at > {now})
RETURNING `

func (s *Store) ChallengeClaim(ctx context.Context, u store.SignedUse, challengeID string) (*store.Challenge, bool, error) {
	// The compare-and-swap: only one caller gets the row back. The
	// authorization must still be pending and unexpired on the database
	// clock, and with a nonce, the account's.
	if !store.Storable(challengeID) && u.Nonce.Nonce != "" {
		return nil, false, nil
	}
	var c challengeRow
	var b batch
	b.scan("claiming challenge "+challengeID, c.dest(), challengeClaimSQL+challengeCols, challengeID, u.AccountID)
	var out *store.Challenge
	won, err := s.claim(ctx, u, &b, jobs.ChallengeValidateArgs{ChallengeID: challengeID}, func() (err error) {
		out, err = c.finish()
		return err
	})
	switch {
	case err != nil:
		return nil, false, err
	case !won && u.Nonce.Nonce == "":
		// Another claim, a verdict or an expiry moved it first: report it
		// as it now stands.
		out, err = s.ChallengeByID(ctx, challengeID)
		if err != nil {
			return nil, false, fmt.Errorf("claiming challenge %s: %w", challengeID, err)
		}
	}
	return out, won, nil
}
