package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

var problemExpired = acme.Problem{Type: acme.ProblemUnauthorized, Detail: "the order expired, or one of its authorizations expired or stopped being valid, before the order was finalized"}

// ExpirePending moves pending authorizations past their expiry to expired
// and pending or ready orders past theirs, or with an authorization that
// can no longer become valid (expired, deactivated, revoked or invalid),
// to invalid (RFC 8555 §7.1.6).
func (s *Store) ExpirePending(ctx context.Context) (int64, error) {
	pt, err := problemText(&problemExpired)
	if err != nil {
		return 0, err
	}
	var total int64
	err = s.inTx(ctx, func(t *txn) error {
		total = 0
		if err := lockOrders(ctx, t, `SELECT id FROM orders WHERE status IN ('pending', 'ready') AND expires_at <= {now} ORDER BY id {forupdate}`); err != nil {
			return err
		}
		n, err := t.exec(ctx, `UPDATE authorizations SET status = 'expired', updated_at = {now} WHERE status = 'pending' AND expires_at <= {now}`)
		if err != nil {
			return err
		}
		total += n
		n, err = t.exec(ctx, expireOrdersSQL, pt)
		total += n
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("expiring pending authorizations and orders: %w", err)
	}
	return total, nil
}

// expireOrdersSQL is ExpirePending's orders statement: $1 the problem. The
// OFFSET (with a LIMIT, as SQLite needs one) keeps PostgreSQL from
// rewriting the EXISTS, so it stays a subquery run for each open order
// through order_authz's and authorizations' keys: rewritten, it was planned
// as a hashed set of every authorization ever stored that is neither
// pending nor valid (expired, deactivated, invalid: a set that only grows),
// read in full by sequential scans on every housekeeping run
// (TestExpirePendingPlan). The open orders themselves are still read;
// they are bounded by the order lifetime.
const expireOrdersSQL = `UPDATE orders SET status = 'invalid', error = $1, updated_at = {now}
WHERE status IN ('pending', 'ready') AND (expires_at <= {now} OR EXISTS (
  SELECT 1 FROM order_authz oa JOIN authorizations a ON a.id = oa.authz_id
  WHERE oa.order_id = orders.id AND a.status NOT IN ('pending', 'valid') LIMIT 1 OFFSET 0))`

// Stranded finds subjects left processing with no outstanding job in River's
// river_job table: their job was lost (deleted, or discarded without a
// verdict), so no worker will ever move them.
func (s *Store) Stranded(ctx context.Context, olderThan time.Time) ([]jobs.Subject, error) {
	var out []jobs.Subject
	err := s.inTx(ctx, func(t *txn) error {
		out = nil
		scan := func(kind string) func(Rows) error {
			return func(r Rows) error {
				var id string
				if err := r.Scan(&id); err != nil {
					return err
				}
				out = append(out, jobs.Subject{Kind: kind, ID: id})
				return nil
			}
		}
		if err := collect(ctx, t, scan(jobs.KindChallengeValidate), `SELECT c.id FROM challenges c
WHERE c.status = 'processing' AND c.updated_at < $1
  AND NOT EXISTS (SELECT 1 FROM river_job j WHERE j.kind = $2 AND j.state IN `+outstandingStates+`
                  AND {json:j.args:challenge_id} = c.id)
ORDER BY c.updated_at`, s.d.T(olderThan), jobs.KindChallengeValidate); err != nil {
			return err
		}
		return collect(ctx, t, scan(jobs.KindSignerIssue), `SELECT o.id FROM orders o
WHERE o.status = 'processing' AND o.updated_at < $1
  AND NOT EXISTS (SELECT 1 FROM river_job j WHERE j.kind = $2 AND j.state IN `+outstandingStates+`
                  AND {json:j.args:order_id} = o.id)
ORDER BY o.updated_at`, s.d.T(olderThan), jobs.KindSignerIssue)
	})
	if err != nil {
		return nil, fmt.Errorf("finding stranded claims: %w", err)
	}
	return out, nil
}

// outstandingStates are the River job states in which a job will still run.
const outstandingStates = `('available', 'pending', 'running', 'retryable', 'scheduled')`

// Requeue inserts the job of a subject that is still processing;
// store.ErrConflict when it no longer is (a verdict landed meanwhile).
func (s *Store) Requeue(ctx context.Context, sub jobs.Subject) error {
	return s.inTx(ctx, func(t *txn) error {
		switch sub.Kind {
		case jobs.KindChallengeValidate:
			c, err := s.challengeByID(ctx, t, sub.ID)
			if err != nil {
				return err
			}
			if c.Status != acme.StatusProcessing {
				return fmt.Errorf("requeueing challenge %s: it is %s, not processing: %w", sub.ID, c.Status, store.ErrConflict)
			}
			return s.enqueue(ctx, t, jobs.ChallengeValidateArgs{ChallengeID: sub.ID})
		case jobs.KindSignerIssue:
			o, err := s.orderByID(ctx, t, sub.ID)
			if err != nil {
				return err
			}
			if o.Status != acme.StatusProcessing {
				return fmt.Errorf("requeueing order %s: it is %s, not processing: %w", sub.ID, o.Status, store.ErrConflict)
			}
			return s.enqueue(ctx, t, jobs.SignerIssueArgs{OrderID: sub.ID, Profile: o.Profile})
		}
		return fmt.Errorf("requeueing %s %s: the store has no subjects of that kind", sub.Kind, sub.ID)
	})
}

// Abandon records a failure on a processing subject so no client polls it
// forever, and reports whether it did. A subject that is no longer
// processing already has its verdict: there is nothing to abandon, and
// Abandon returns false and no error (the jobs layer must not retry a
// finished job), so that a caller never reports a failure it did not
// record.
func (s *Store) Abandon(ctx context.Context, sub jobs.Subject, p acme.Problem) (bool, error) {
	var moved bool
	err := s.inTx(ctx, func(t *txn) (err error) {
		moved, err = s.abandon(ctx, t, sub, p)
		return err
	})
	if errors.Is(err, errLost) || errors.Is(err, store.ErrConflict) {
		return false, nil // a verdict landed between the read and the swap
	}
	return moved && err == nil, err
}

// abandon is Abandon in t; a verdict landing between its read and its swap
// is errLost or store.ErrConflict, and t must roll back.
func (s *Store) abandon(ctx context.Context, t *txn, sub jobs.Subject, p acme.Problem) (bool, error) {
	if p.Type == "" {
		p.Type = acme.ProblemServerInternal
	}
	switch sub.Kind {
	case jobs.KindChallengeValidate:
		c, err := s.challengeByID(ctx, t, sub.ID)
		if err != nil || c.Status != acme.StatusProcessing {
			return false, err
		}
		if err := s.verdict(ctx, t, store.Verdict{ChallengeID: sub.ID, Status: acme.StatusInvalid, Error: &p}); err != nil {
			return false, err
		}
	case jobs.KindSignerIssue:
		o, err := s.orderByID(ctx, t, sub.ID)
		if err != nil || o.Status != acme.StatusProcessing {
			return false, err
		}
		if err := s.orderFail(ctx, t, sub.ID, p); err != nil {
			return false, err
		}
	default:
		return false, fmt.Errorf("abandoning %s %s: the store has no subjects of that kind", sub.Kind, sub.ID)
	}
	return true, nil
}
