package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hallmark-ca/hallmark/store"
)

// upstreamOrderInsertSQL records the first upstream order of a Hallmark
// order and backend; a row already there is left alone, and the caller
// sees no row written.
const upstreamOrderInsertSQL = `INSERT INTO upstream_orders (order_id, backend, account_url, order_url, placed_at)
VALUES ($1, $2, $3, $4, {now})
ON CONFLICT (order_id, backend) DO NOTHING`

// upstreamOrderHeldSQL reads the row upstreamOrderReplaceSQL would
// replace, locking it on PostgreSQL.
const upstreamOrderHeldSQL = `SELECT account_url, placed_at FROM upstream_orders
WHERE order_id = $1 AND backend = $2 AND order_url = $3{forupdate}`

// upstreamOrderReplaceSQL puts another upstream order in the place of the
// one at $5, only if that one is still the recorded one.
const upstreamOrderReplaceSQL = `UPDATE upstream_orders SET account_url = $3, order_url = $4, placed_at = {now}
WHERE order_id = $1 AND backend = $2 AND order_url = $5`

func (s *Store) UpstreamOrderRecord(ctx context.Context, o store.UpstreamOrder, replaces string) error {
	var n int64
	var err error
	if replaces == "" {
		err = s.autocommit(ctx, func(t *txn) error {
			n, err = t.exec(ctx, upstreamOrderInsertSQL, o.OrderID, o.Backend, o.AccountURL, o.OrderURL)
			return err
		})
	} else {
		// The replaced order may have issued (placed by another account,
		// which this worker cannot read): its URL is kept in the audit
		// log, in the replacement's transaction, not only in a worker's
		// log line.
		err = s.inTx(ctx, func(t *txn) error {
			var old store.UpstreamOrder
			err := t.queryRow(ctx, upstreamOrderHeldSQL, o.OrderID, o.Backend, replaces).Scan(&old.AccountURL, ts(&old.PlacedAt))
			if errors.Is(err, store.ErrNotFound) {
				return nil // replaced meanwhile: n stays 0
			}
			if err != nil {
				return err
			}
			if n, err = t.exec(ctx, upstreamOrderReplaceSQL, o.OrderID, o.Backend, o.AccountURL, o.OrderURL, replaces); err != nil || n == 0 {
				return err
			}
			return s.audit(ctx, t, store.AuditEvent{Actor: "relay:" + o.Backend, Action: "upstream_order.replaced", Subject: o.OrderID,
				Detail: fmt.Sprintf("upstream order %s (account %s, placed %s) replaced by %s (account %s); if the replaced one was finalized, its certificate is live at the upstream and not in Hallmark",
					replaces, old.AccountURL, old.PlacedAt.UTC().Format(time.RFC3339), o.OrderURL, o.AccountURL)})
		})
	}
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

func (s *Store) UpstreamOrdersOf(ctx context.Context, orderID string) ([]store.UpstreamOrder, error) {
	var out []store.UpstreamOrder
	err := s.autocommit(ctx, func(t *txn) error {
		out = out[:0]
		rows, err := t.query(ctx, `SELECT backend, account_url, order_url, placed_at FROM upstream_orders
WHERE order_id = $1 ORDER BY backend`, orderID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			o := store.UpstreamOrder{OrderID: orderID}
			if err := rows.Scan(&o.Backend, &o.AccountURL, &o.OrderURL, ts(&o.PlacedAt)); err != nil {
				return err
			}
			out = append(out, o)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("listing the upstream orders of order %s: %w", orderID, err)
	}
	return out, nil
}
