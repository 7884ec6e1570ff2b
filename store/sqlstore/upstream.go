package sqlstore

import (
	"context"
	"fmt"

	"github.com/hallmark-ca/hallmark/store"
)

// upstreamDueSQL lists the live certificates of relay issuer $1 whose
// upstream window is due, never fetched first, then the longest overdue,
// at most $2. The certificates are a range of certificates_relay_live_idx
// (migration 0010): its predicate is repeated here word for word so that
// both planners see the index applies. Each run reads every live
// certificate of the relay and its window row to find the due ones; the
// relay's live certificates, not the whole table.
const upstreamDueSQL = `SELECT c.serial, c.der FROM certificates c
LEFT JOIN upstream_renewal_windows u ON u.serial = c.serial
WHERE c.issuer_id = $1 AND c.issuer_id LIKE 'relay:%' AND c.revoked_at IS NULL AND c.not_after > {now}
  AND (u.serial IS NULL OR u.next_check_at <= {now})
ORDER BY u.next_check_at IS NOT NULL, u.next_check_at, c.serial
LIMIT $2`

func (s *Store) UpstreamDue(ctx context.Context, issuerID string, limit int) ([]store.UpstreamDue, error) {
	var out []store.UpstreamDue
	err := s.autocommit(ctx, func(t *txn) error {
		out = nil
		return collect(ctx, t, func(r Rows) error {
			var d store.UpstreamDue
			if err := r.Scan(&d.Serial, &d.DER); err != nil {
				return err
			}
			out = append(out, d)
			return nil
		}, upstreamDueSQL, issuerID, limit)
	})
	if err != nil {
		return nil, fmt.Errorf("listing the certificates of %s whose upstream window is due: %w", issuerID, err)
	}
	return out, nil
}

const upstreamRecordSQL = `INSERT INTO upstream_renewal_windows (serial, window_start, window_end, explanation_url, checked_at, next_check_at)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (serial) DO UPDATE SET window_start = excluded.window_start, window_end = excluded.window_end,
  explanation_url = excluded.explanation_url, checked_at = excluded.checked_at, next_check_at = excluded.next_check_at`

func (s *Store) UpstreamRecord(ctx context.Context, w store.UpstreamWindow) error {
	var start, end any // NULL: the upstream knows no window
	if w.Known() {
		start, end = s.d.T(w.Start), s.d.T(w.End)
	}
	err := s.autocommit(ctx, func(t *txn) error {
		_, err := t.exec(ctx, upstreamRecordSQL, w.Serial, start, end, w.ExplanationURL, s.d.T(w.CheckedAt), s.d.T(w.NextCheckAt))
		return err
	})
	if err != nil {
		return fmt.Errorf("recording the upstream renewal window of %s: %w", w.Serial, err)
	}
	return nil
}

func (s *Store) UpstreamWindowBySerial(ctx context.Context, serial string) (*store.UpstreamWindow, error) {
	w := store.UpstreamWindow{Serial: serial}
	err := s.autocommit(ctx, func(t *txn) error {
		return t.queryRow(ctx, `SELECT window_start, window_end, explanation_url, checked_at, next_check_at
FROM upstream_renewal_windows WHERE serial = $1 AND window_end IS NOT NULL`, serial).
			Scan(ts(&w.Start), ts(&w.End), &w.ExplanationURL, ts(&w.CheckedAt), ts(&w.NextCheckAt))
	})
	if err != nil {
		return nil, fmt.Errorf("reading the upstream renewal window of %s: %w", serial, err)
	}
	return &w, nil
}
