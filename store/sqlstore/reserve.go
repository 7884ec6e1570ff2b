package sqlstore

import (
	"context"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// A newOrder reserves its units of the account's limits (store.OrderLimits)
// in its own transaction: the account's row is locked first ({forupdate};
// SQLite's BEGIN IMMEDIATE serializes writers already), so another
// newOrder of the account waits for this one's COMMIT, and at READ
// COMMITTED its counts, each a statement of its own taken after the lock,
// see the order this one wrote. Racing newOrders on any number of
// frontends for the last unit admit exactly one. Only newOrders with a
// limit set take the lock.

// lockAccountSQL serializes the account's limited newOrders.
const lockAccountSQL = `SELECT 1 FROM accounts WHERE id = $1 {forupdate}`

// pendingFresh counts o's new authorizations that will be pending: one born
// valid waits for no validation and takes no unit.
func pendingFresh(d orderDraft) int {
	n := 0
	for _, a := range d.fresh {
		if a.Status != acme.StatusValid {
			n++
		}
	}
	return n
}

// reserveOrder locks the account and counts its limits in one round trip,
// inside OrderCreate's transaction t, before the order is written: a
// *store.RateLimited when o is over one of them, nil when it is within
// all, or none is set.
func (s *Store) reserveOrder(ctx context.Context, t *txn, o store.NewOrder, d orderDraft) error {
	l, fresh := o.Limits, pendingFresh(d)
	orders, pending := l.Orders > 0, l.PendingAuthzs > 0 && fresh > 0
	if !orders && !pending {
		return nil
	}
	var b batch
	var locked int
	b.scan("locking the account for its rate limits", []any{&locked}, lockAccountSQL, o.AccountID)
	var oc, pc rateScan
	if orders {
		b.scan("counting orders for a rate limit", oc.dest(), rateOrdersSQL, o.AccountID, -l.OrdersWindow.Microseconds())
	}
	if pending {
		b.scan("counting pending authorizations for a rate limit", pc.dest(), ratePendingSQL, o.AccountID)
	}
	if _, err := t.send(ctx, &b); err != nil {
		return err
	}
	if rc := oc.count(); orders && rc.Count >= l.Orders {
		return &store.RateLimited{Limit: store.LimitOrders, Max: l.Orders, Count: rc, Opens: rc.Oldest.Add(l.OrdersWindow), Window: l.OrdersWindow}
	}
	if rc := pc.count(); pending && rc.Count+fresh > l.PendingAuthzs {
		return &store.RateLimited{Limit: store.LimitPendingAuthzs, Max: l.PendingAuthzs, Count: rc, Opens: rc.Oldest, Fresh: fresh}
	}
	return nil
}

// reserveChecks queues on b, for a claimed OrderCreate, the account's lock and
// one check per limit of o, each returning a row only when o is within it
// (for mustMoveAt: a limit reached commits nothing, and the ordinary path,
// with OrderCreate's reserveOrder, answers it). It returns the checks'
// indexes.
func reserveChecks(b *batch, o store.NewOrder, d orderDraft) []int {
	l, fresh := o.Limits, pendingFresh(d)
	orders, pending := l.Orders > 0, l.PendingAuthzs > 0 && fresh > 0
	if !orders && !pending {
		return nil
	}
	var one int
	checks := []int{b.scan("locking the account for its rate limits", []any{&one}, lockAccountSQL, o.AccountID)}
	if orders {
		checks = append(checks, b.scan("", []any{&one}, `SELECT 1 WHERE (SELECT COUNT(*) FROM orders
WHERE account_id = $1 AND created_at > {now+$2}) < $3`, o.AccountID, -l.OrdersWindow.Microseconds(), l.Orders))
	}
	if pending {
		checks = append(checks, b.scan("", []any{&one}, `SELECT 1 WHERE (SELECT COUNT(*) FROM authorizations
WHERE account_id = $1 AND status = 'pending' AND expires_at > {now}) + $2 <= $3`, o.AccountID, fresh, l.PendingAuthzs))
	}
	return checks
}

// rateScan scans a rate count's row (COUNT, MIN(time), {now}).
type rateScan struct {
	n      int64
	oldest *time.Time
	now    time.Time
}

func (r *rateScan) dest() []any { return []any{&r.n, tsNull(&r.oldest), ts(&r.now)} }

func (r *rateScan) count() store.RateCount {
	rc := store.RateCount{Count: int(r.n), Now: r.now}
	if r.oldest != nil {
		rc.Oldest = *r.oldest
	}
	return rc
}
