package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// Rate limits count the records themselves (orders, certificates,
// authorizations) on the database clock; there is no counter table to keep
// in step. Migration 0002 adds the indexes these counts use; certificates
// are counted from certificate_domains (migration 0005), written with
// them.

// rateCount runs a query selecting COUNT, MIN(time) and {now}.
func (s *Store) rateCount(ctx context.Context, what, q string, args ...any) (store.RateCount, error) {
	var rc store.RateCount
	err := s.autocommit(ctx, func(t *txn) error {
		var oldest *time.Time
		var n int64
		if err := t.queryRow(ctx, q, args...).Scan(&n, tsNull(&oldest), ts(&rc.Now)); err != nil {
			return err
		}
		rc.Count = int(n)
		rc.Oldest = time.Time{}
		if oldest != nil {
			rc.Oldest = *oldest
		}
		return nil
	})
	if err != nil {
		return store.RateCount{}, fmt.Errorf("counting %s for a rate limit: %w", what, err)
	}
	return rc, nil
}

// rateOrdersSQL counts an account's orders created in a window ($2,
// negative microseconds).
const rateOrdersSQL = `SELECT COUNT(*), MIN(created_at), {now} FROM orders
WHERE account_id = $1 AND created_at > {now+$2}`

func (s *Store) RateOrders(ctx context.Context, accountID string, window time.Duration) (store.RateCount, error) {
	return s.rateCount(ctx, "orders", rateOrdersSQL, accountID, -window.Microseconds())
}

// rateCertificatesSQL counts the certificates issued in a window under a
// domain: certificate_domains holds each certificate under each of its names
// and their parent domains (queueCertificate, migration 0005), so the count
// is one range of certificate_domains_issued_idx, with or without
// statistics, however many certificates were ever issued.
const rateCertificatesSQL = `SELECT COUNT(*), MIN(issued_at), {now} FROM certificate_domains
WHERE domain = $2 AND issued_at > {now+$1}`

func (s *Store) RateCertificates(ctx context.Context, registeredDomain string, window time.Duration) (store.RateCount, error) {
	d := strings.TrimRight(strings.ToLower(registeredDomain), ".")
	return s.rateCount(ctx, "certificates", rateCertificatesSQL, -window.Microseconds(), d)
}

func (s *Store) RateFailedValidations(ctx context.Context, accountID string, id acme.Identifier, window time.Duration) (store.RateCount, error) {
	return s.rateCount(ctx, "failed validations", `SELECT COUNT(*), MIN(updated_at), {now} FROM authorizations
WHERE account_id = $1 AND identifier_type = $2 AND identifier_value = $3 AND status = 'invalid' AND updated_at > {now+$4}`,
		accountID, string(id.Type), id.Value, -window.Microseconds())
}

// ratePendingSQL counts an account's pending, unexpired authorizations.
const ratePendingSQL = `SELECT COUNT(*), MIN(expires_at), {now} FROM authorizations
WHERE account_id = $1 AND status = 'pending' AND expires_at > {now}`

func (s *Store) RatePendingAuthzs(ctx context.Context, accountID string) (store.RateCount, error) {
	return s.rateCount(ctx, "pending authorizations", ratePendingSQL, accountID)
}
