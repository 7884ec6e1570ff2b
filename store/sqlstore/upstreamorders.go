package sqlstore

import (
	"context"
	"fmt"

	"github.com/hallmark-ca/hallmark/store"
)

// upstreamOrderInsertSQL records the first upstream order of a Hallmark
// order and backend; a row already there is left alone, and the caller
// sees no row written.
const upstreamOrderInsertSQL = `INSERT INTO upstream_orders (order_id, backend, account_url, order_url, placed_at)
VALUES ($1, $2, $3, $4, {now})
ON CONFLICT (order_id, backend) DO NOTHING`

// upstreamOrderReplaceSQL puts another upstream order in the place of the
// one at $5, only if that one is still the recorded one.
const upstreamOrderReplaceSQL = `UPDATE upstream_orders SET account_url = $3, order_url = $4, placed_at = {now}
WHERE order_id = $1 AND backend = $2 AND order_url = $5`

func (s *Store) UpstreamOrderRecord(ctx context.Context, o store.UpstreamOrder, replaces string) error {
	q, args := upstreamOrderInsertSQL, []any{o.OrderID, o.Backend, o.AccountURL, o.OrderURL}
	if replaces != "" {
		q, args = upstreamOrderReplaceSQL, append(args, replaces)
	}
	var n int64
	err := s.autocommit(ctx, func(t *txn) error {
		var err error
		n, err = t.exec(ctx, q, args...)
		return err
	})
	if err != nil {
		return fmt.Errorf("journaling upstream order %s of backend %s for order %s: %w", o.OrderURL, o.Backend, o.OrderID, err)
	}
	if n == 0 {
		held := "an upstream order for it already"
		if replaces != "" {
			held = "another upstream order for it than " + replaces
		}
		return fmt.Errorf("journaling upstream order %s of backend %s for order %s: the journal holds %s (another attempt recorded its own): %w",
			o.OrderURL, o.Backend, o.OrderID, held, store.ErrConflict)
	}
	return nil
}

func (s *Store) UpstreamOrderFor(ctx context.Context, orderID, backend string) (*store.UpstreamOrder, error) {
	o := store.UpstreamOrder{OrderID: orderID, Backend: backend}
	err := s.autocommit(ctx, func(t *txn) error {
		return t.queryRow(ctx, `SELECT account_url, order_url, placed_at FROM upstream_orders
WHERE order_id = $1 AND backend = $2`, orderID, backend).Scan(&o.AccountURL, &o.OrderURL, ts(&o.PlacedAt))
	})
	if err != nil {
		return nil, fmt.Errorf("reading the upstream order of backend %s for order %s: %w", backend, orderID, err)
	}
	return &o, nil
}
