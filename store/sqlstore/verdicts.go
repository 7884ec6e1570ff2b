package sqlstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

func (s *Store) ChallengeVerdict(ctx context.Context, v store.Verdict) error {
	if v.Status != acme.StatusValid && v.Status != acme.StatusInvalid {
		return fmt.Errorf("recording verdict on challenge %s: status %q is neither valid nor invalid", v.ChallengeID, v.Status)
	}
	err := s.inTx(ctx, func(t *txn) error {
		return s.verdict(ctx, t, v)
	})
	if errors.Is(err, errLost) {
		// Read the challenge as it stands, outside the rolled-back
		// transaction: a verdict is terminal, and there may be no such
		// challenge at all.
		c, rerr := s.ChallengeByID(ctx, v.ChallengeID)
		if rerr != nil {
			return fmt.Errorf("recording verdict on challenge %s: %w", v.ChallengeID, rerr)
		}
		return fmt.Errorf("recording verdict on challenge %s: it is %s, not processing (a verdict is terminal): %w", v.ChallengeID, c.Status, store.ErrConflict)
	}
	return err
}

// verdict moves a processing challenge to valid or invalid, and its
// authorization and orders with it (RFC 8555 §7.1.6), recording trail if
// set, or returns errLost
// when the challenge is not processing (or does not exist), and the
// transaction must roll back. It is the last thing its transaction does:
// on PostgreSQL it sends every statement and the COMMIT in one round trip
// (sendSwapLast), so callers run nothing on t after it.
func (s *Store) verdict(ctx context.Context, t *txn, v store.Verdict) error {
	challengeID, status, p, record, trail := v.ChallengeID, v.Status, v.Error, v.ValidationRecord, v.Trail
	pt, err := problemText(p)
	if err != nil {
		return err
	}
	validated := "NULL"
	if status == acme.StatusValid {
		validated = "{now}"
	}
	// The statements find the authorization and its orders from the
	// challenge themselves, so that none needs another's result and all go
	// in one batch. In order:
	//   - lock (PostgreSQL) the orders using the challenge's authorization,
	//     in id order, before anything moves. A verdict on another
	//     authorization of the same order waits here; each statement after
	//     it takes a fresh snapshot (READ COMMITTED), so it sees that
	//     verdict's authorization when it decides whether the order is
	//     ready. Nothing else is locked while it waits;
	//   - the challenge's compare-and-swap: a lost swap stops the batch
	//     before anything else moves;
	//   - the authorization, only while pending: a second challenge's late
	//     verdict never undoes the first's;
	//   - for valid, the orders whose authorizations are now all valid; for
	//     invalid, the sibling challenges and the orders, only if the
	//     authorization is invalid (were it invalid already, this challenge
	//     would have been invalidated with it and lost its swap);
	//   - the announcement to the frontends (announce), sent at the commit.
	// The orders are found from the challenge, never through their status:
	// {inlist} makes PostgreSQL look the challenge's few orders up by id
	// before it reads any order (an InitPlan, then orders_id_key), and
	// each order's status is tested as an expression no index answers
	// (status || ''), so it cannot start from orders_status_idx instead.
	// A semi-join on the orders left that choice to the planner: on
	// tables never analysed (a fresh database, autovacuum behind) it
	// walked every pending order through orders_status_idx to move one
	// (TestVerdictPlans: 20,000 read).
	if status == acme.StatusInvalid {
		// Before the batch, which carries the COMMIT: a lost swap rolls
		// the notification back with the verdict.
		if err := s.notify(ctx, t, challengeNotice(challengeID, p, trail)); err != nil {
			return err
		}
	}
	var b batch
	b.exec("", verdictLockSQL, challengeID)
	var moved string
	swap := b.scan("", []any{&moved}, fmt.Sprintf(verdictSwapSQL, validated), challengeID, string(status), pt, string(record))
	b.exec("", verdictAuthzSQL, challengeID, string(status))
	if status == acme.StatusValid {
		s.queueValid(&b, v)
	} else {
		queueInvalid(&b, challengeID, p, pt)
	}
	if trail != nil {
		b.exec("recording the trail", auditInsertSQL, s.auditArgs(*trail)...)
	}
	s.announce(&b, challengeID)
	_, won, err := t.sendSwapLast(ctx, &b, swap)
	if err != nil {
		return fmt.Errorf("recording verdict on challenge %s: %w", challengeID, err)
	}
	if !won {
		return errLost
	}
	return nil
}

// queueValid queues on b what a valid verdict moves beyond the challenge.
func (s *Store) queueValid(b *batch, v store.Verdict) {
	if !v.ExpiresBy.IsZero() {
		b.exec("", verdictExpiresBySQL, v.ChallengeID, s.d.T(v.ExpiresBy))
	}
	if v.Corroborated {
		b.exec("", verdictCorroboratedSQL, v.ChallengeID)
	}
	b.exec("", verdictReadySQL, v.ChallengeID)
	b.exec("", streakResetSQL, v.ChallengeID) // pauses.go
}

// queueInvalid queues on b what an invalid verdict moves beyond the
// challenge: problem p (as text pt) on its siblings and orders.
func queueInvalid(b *batch, challengeID string, p *acme.Problem, pt string) {
	if p == nil || p.Type != acme.ProblemServerInternal {
		// The client's failure, not the CA's (an abandoned job): it
		// lengthens the account's run for the identifier.
		b.exec("", streakFailSQL, challengeID, -streakGap.Microseconds())
	}
	if p == nil {
		pt, _ = problemText(&acme.Problem{Type: acme.ProblemUnauthorized, Detail: "challenge " + challengeID + " failed"})
	}
	b.exec("", verdictSiblingsSQL, challengeID)
	b.exec("", verdictInvalidSQL, challengeID, pt)
}

// verdictCorroboratedSQL marks challenge $1's authorization corroborated
// by network perspectives, only as the verdict makes it valid.
const verdictCorroboratedSQL = `UPDATE authorizations SET corroborated = TRUE
WHERE id = (SELECT authz_id FROM challenges WHERE id = $1) AND status = 'valid'`

// ordersOf selects the orders using challenge $1's authorization (verdict).
const ordersOf = `SELECT oa.order_id FROM order_authz oa JOIN challenges c ON c.authz_id = oa.authz_id WHERE c.id = $1`

// lockOrder locks (PostgreSQL) the order x.order_id, by its key. The
// statements on an authorization's few orders reach each by its key, one
// lookup a row of x (a scalar subquery, or UPDATE ... FROM x): a plan made
// while the orders table was small, which a connection keeps as the table
// grows, is still an index lookup. A list (id = ANY) was planned as a
// scan of every order there (TestPlansMadeSmall).
const lockOrder = `COALESCE((SELECT o.id FROM orders o WHERE o.id = x.order_id{forupdate}), '')`

// The verdict's statements on the challenge's authorization's orders
// (verdict): for valid, the pending orders whose authorizations are now
// all valid become ready; for invalid, the sibling challenges, and the
// pending orders, only if the authorization is invalid.
const (
	verdictLockSQL  = `SELECT ` + lockOrder + ` FROM (` + ordersOf + ` ORDER BY 1) x`
	verdictReadySQL = `UPDATE orders SET status = 'ready', updated_at = {now}
FROM (` + ordersOf + `) x WHERE orders.id = x.order_id AND orders.status || '' = 'pending'
  AND NOT EXISTS (SELECT 1 FROM order_authz oa JOIN authorizations a ON a.id = oa.authz_id
                  WHERE oa.order_id = orders.id AND a.status <> 'valid')`
	verdictInvalidAuthz = `EXISTS (SELECT 1 FROM authorizations a JOIN challenges c ON c.authz_id = a.id WHERE c.id = $1 AND a.status = 'invalid')`
	verdictSiblingsSQL  = `UPDATE challenges SET status = 'invalid', updated_at = {now}
WHERE authz_id = (SELECT authz_id FROM challenges WHERE id = $1) AND id <> $1 AND status IN ('pending', 'processing')
  AND ` + verdictInvalidAuthz
	verdictInvalidSQL = `UPDATE orders SET status = 'invalid', error = $2, updated_at = {now}
FROM (` + ordersOf + `) x WHERE orders.id = x.order_id AND orders.status || '' = 'pending' AND ` + verdictInvalidAuthz
)

// verdictSwapSQL is the verdict's swap of challenge $1 processing → $2,
// with its error $3 and record $4; %s is what validated_at becomes.
const verdictSwapSQL = `UPDATE challenges SET status = $2, error = $3, validation_record = $4, validated_at = %s, updated_at = {now}
WHERE id = $1 AND status || '' = 'processing' RETURNING id`

// verdictExpiresBySQL brings the expiry of challenge $1's authorization,
// just made valid, forward to $2 when that is sooner (Verdict.ExpiresBy).
const verdictExpiresBySQL = `UPDATE authorizations SET expires_at = $2
WHERE id = (SELECT authz_id FROM challenges WHERE id = $1) AND status || '' = 'valid' AND expires_at > $2`

// verdictAuthzSQL moves challenge $1's authorization pending → $2.
const verdictAuthzSQL = `UPDATE authorizations SET status = $2, updated_at = {now}
WHERE id = (SELECT authz_id FROM challenges WHERE id = $1) AND status || '' = 'pending'`
