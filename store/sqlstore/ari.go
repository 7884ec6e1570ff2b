package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hallmark-ca/hallmark/store"
)

// movableSQL is the statement choosing the certificates sel names (a
// RenewalSelector): live ones (unexpired, unrevoked) matching every set
// field, by serial. A serial is its unique key; an account a range of
// certificates_account_idx, written as where.pin does so that a generic
// plan expects the few rows of an account, not half the table. An issuer
// or a profile has no index, by choice: a move by either is an incident
// tool run once, and reads every live certificate then rather than have
// every issuance write two more index entries.
func movableSQL(sel store.RenewalSelector) (string, []any) {
	var w where
	if sel.Serial != "" {
		w.and(`serial = $?`, sel.Serial)
	}
	if sel.IssuerID != "" {
		w.and(`issuer_id = $?`, sel.IssuerID)
	}
	if sel.Profile != "" {
		w.and(`profile = $?`, sel.Profile)
	}
	if sel.AccountID != "" {
		w.pin("account_id", sel.AccountID) // for the estimate: sql() orders by nothing
	}
	w.and(`revoked_at IS NULL`)
	w.and(`not_after > {now}`)
	return `SELECT serial FROM certificates
` + w.sql() + `
ORDER BY serial`, w.args
}

func (s *Store) RenewalMove(ctx context.Context, sel store.RenewalSelector, start, end time.Time, reason string, ev store.AuditEvent) ([]string, error) {
	if sel.Empty() {
		return nil, errors.New("moving renewal windows: name a serial, issuer, profile or account; an empty selection would move every certificate")
	}
	if !end.After(start) {
		return nil, fmt.Errorf("moving renewal windows: the window end %v must be after its start %v", end, start)
	}
	var moved []string
	err := s.inTx(ctx, func(t *txn) error {
		moved = nil
		q, args := movableSQL(sel)
		if err := collect(ctx, t, func(r Rows) error {
			var serial string
			if err := r.Scan(&serial); err != nil {
				return err
			}
			moved = append(moved, serial)
			return nil
		}, q, args...); err != nil {
			return fmt.Errorf("selecting certificates to move: %w", err)
		}
		for _, serial := range moved {
			if _, err := t.exec(ctx, `INSERT INTO renewal_windows (serial, window_start, window_end, reason, actor, moved_at)
VALUES ($1, $2, $3, $4, $5, {now})
ON CONFLICT (serial) DO UPDATE SET window_start = excluded.window_start, window_end = excluded.window_end,
  reason = excluded.reason, actor = excluded.actor, moved_at = excluded.moved_at`,
				serial, s.d.T(start), s.d.T(end), reason, ev.Actor); err != nil {
				return fmt.Errorf("moving the renewal window of %s: %w", serial, err)
			}
		}
		if len(moved) == 0 {
			return nil // nothing moved: nothing to audit
		}
		if ev.Detail == "" {
			ev.Detail = reason
		}
		ev.Detail = strconv.Itoa(len(moved)) + " certificate(s): " + ev.Detail
		return s.audit(ctx, t, ev)
	})
	if err != nil {
		return nil, err
	}
	return moved, nil
}

func (s *Store) RenewalWindowBySerial(ctx context.Context, serial string) (*store.RenewalWindow, error) {
	var w store.RenewalWindow
	err := s.autocommit(ctx, func(t *txn) error {
		return t.queryRow(ctx, `SELECT serial, window_start, window_end, reason, actor, moved_at FROM renewal_windows WHERE serial = $1`, serial).
			Scan(&w.Serial, ts(&w.Start), ts(&w.End), &w.Reason, &w.Actor, ts(&w.MovedAt))
	})
	if err != nil {
		return nil, fmt.Errorf("reading the renewal window of %s: %w", serial, err)
	}
	return &w, nil
}

// replaceSQL marks certificate $1 of account $2 replaced by order $3,
// unless an order that may still finish replaces it already. The replacing
// order is read by its key, in a scalar subquery (an EXISTS was planned as
// a scan of every order while the table was small, and kept), its status
// hidden from index choice
// (concatenated with an empty string): as a list of the orders that failed
// or expired, PostgreSQL read every invalid order and every open one of
// orders_status_idx (2,100 of a fleet's, any statistics, custom and
// generic plans; TestFleetPlans). The certificate is found by its serial
// alone: its account is no index's to answer either.
const replaceSQL = `UPDATE certificates SET replaced_by = $3
WHERE serial = $1 AND account_id || '' = $2
  AND (replaced_by = '' OR COALESCE((SELECT o.status || '' = 'invalid' OR (o.status || '' IN ('pending', 'ready') AND o.expires_at <= {now})
    FROM orders o WHERE o.id = certificates.replaced_by), FALSE))`

// replace marks a certificate replaced by orderID inside OrderCreate's
// transaction (RFC 9773 §5). A certificate whose replacing order failed
// (invalid) may be replaced again: the client retries its renewal. So may
// one whose replacing order is past its expiry while still stored pending
// or ready: the client is already told that order is invalid
// (protocol/order.go asSeen), and housekeeping may not have moved it yet.
func (s *Store) replace(ctx context.Context, t *txn, serial, accountID, orderID string) error {
	n, err := t.exec(ctx, replaceSQL, serial, accountID, orderID)
	if err != nil {
		return fmt.Errorf("marking certificate %s replaced: %w", serial, err)
	}
	if n == 1 {
		return nil
	}
	var by string
	err = t.queryRow(ctx, `SELECT replaced_by FROM certificates WHERE serial = $1 AND account_id = $2`, serial, accountID).Scan(&by)
	if err != nil {
		return fmt.Errorf("certificate %s of account %s to replace: %w", serial, accountID, err)
	}
	return fmt.Errorf("certificate %s is already replaced by order %s: %w", serial, by, store.ErrConflict)
}
