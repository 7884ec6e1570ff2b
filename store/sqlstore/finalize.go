package sqlstore

import (
	"context"
	"fmt"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/jobs/notify"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// orderClaimSQL is OrderFinalizeBegin's swap of order $1 ready →
// processing with CSR $2 whose key's hash is $4, for profile $3 and
// account $5 (any when empty), less its RETURNING columns. A blocked key
// (blocked_keys, by its primary key) moves nothing, in the claim's own
// statement: a finalize stays one round trip, and only a refused one
// reads why (KeyBlockedBy). A NULL $4 (no key known) is blocked by no row.
const orderClaimSQL = `UPDATE orders SET status = 'processing', csr = $2, csr_spki_sha256 = $4, updated_at = {now}
WHERE id = $1 AND status || '' = 'ready' AND profile = $3 AND (account_id = $5 OR $5 = '') AND expires_at > {now}
  AND NOT EXISTS (SELECT 1 FROM blocked_keys b WHERE b.spki_sha256 = $4)
RETURNING `

// orderFailSQL moves order $1 processing → invalid with problem $2.
const orderFailSQL = `UPDATE orders SET status = 'invalid', error = $2, updated_at = {now} WHERE id = $1 AND status || '' = 'processing'`

func (s *Store) OrderFinalizeBegin(ctx context.Context, u store.SignedUse, orderID, profile string, csrDER, keyHash []byte) (*store.Order, bool, error) {
	// The compare-and-swap: only one caller gets the row back.
	signed := u.Nonce.Nonce != ""
	if signed && (!store.Storable(orderID) || !store.Storable(profile)) {
		return nil, false, nil
	}
	var o orderRow
	var b batch
	// The job goes to the queue of profile, which the caller read: an
	// order of another profile is not claimed (its job would reach the
	// wrong workers).
	b.scan("claiming order "+orderID, o.dest(), orderClaimSQL+orderCols, orderID, nonNil(csrDER), profile, nullBytes(keyHash), u.AccountID)
	var out *store.Order
	won, err := s.claim(ctx, u, &b, jobs.SignerIssueArgs{OrderID: orderID, Profile: profile}, func() (err error) {
		out, err = o.finish()
		return err
	})
	switch {
	case err != nil:
		return nil, false, err
	case !won && !signed:
		// Another finalize or an expiry moved it first, it is not of
		// profile, or keyHash is blocked (the order is still ready).
		out, err = s.OrderByID(ctx, orderID)
		if err != nil {
			return nil, false, fmt.Errorf("claiming order %s: %w", orderID, err)
		}
		if out.Profile != profile {
			return nil, false, fmt.Errorf("claiming order %s: it has profile %q, not %q; nothing was claimed", orderID, out.Profile, profile)
		}
	}
	return out, won, nil
}

// orderIssuedSQL is OrderIssued's compare-and-swap: order $1 processing →
// valid with certificate $2, while its account and authorizations are
// valid (orderAuthorizedSQL).
const orderIssuedSQL = `UPDATE orders SET status = 'valid', cert_serial = $2, updated_at = {now}
WHERE id = $1 AND status || '' = 'processing' AND ` + orderAuthorizedSQL

func (s *Store) OrderIssued(ctx context.Context, in store.Issued) error {
	err := s.inTx(ctx, func(t *txn) error {
		// One batch: the compare-and-swap processing → valid, the order's
		// status as it then stands (for the error when the swap moved
		// nothing), and the certificate's rows. The certificate takes its
		// account and profile defaults from the order row the swap has
		// just made valid with this serial; when the swap moved nothing,
		// the certificate row is not written and its names fail their
		// foreign key, so the batch fails and nothing commits (with no
		// names there is nothing to commit). That is what lets the batch
		// carry the COMMIT (sendLast): one round trip on PostgreSQL.
		//
		// The swap also requires the order's account and authorizations
		// to be valid still (orderAuthorizedSQL): a deactivation that
		// committed while the certificate was signed and did not move the
		// order (on PostgreSQL, one whose statements ran before newOrder
		// committed it) leaves it processing, and the certificate is not
		// recorded; ErrUnauthorized tells the worker to fail the order.
		// Its notifications go first: the batch carries the COMMIT, and a
		// swap that loses rolls them back with it.
		var issuedEv store.AuditEvent
		if in.Trail != nil {
			issuedEv = *in.Trail
		}
		if err := s.notify(ctx, t, certNotice(notify.CertificateIssued, &in.Certificate, issuedEv)); err != nil {
			return err
		}
		var b batch
		moved := b.exec("", orderIssuedSQL, in.OrderID, in.Certificate.Serial)
		var status string
		found := b.scan("", []any{&status}, `SELECT status FROM orders WHERE id = $1`, in.OrderID)
		c := in.Certificate
		c.OrderID = in.OrderID
		inserted, err := s.queueCertificate(&b, c)
		if err != nil {
			return err
		}
		if !s.issuers.has(c.IssuerID) {
			// The first certificate of its issuer here: no certificate is
			// stored whose issuer the operator's views do not list
			// (Issuers).
			b.exec("registering issuer "+c.IssuerID, certIssuerRegisterSQL, c.Serial)
		}
		if in.Trail != nil {
			b.exec("recording the trail", auditInsertSQL, s.auditArgs(*in.Trail)...)
		}
		s.announce(&b, in.OrderID)
		n, err := t.sendLast(ctx, &b)
		if len(n) > found && n[moved] == 0 {
			if n[found] == 0 {
				return fmt.Errorf("reading order %s: %w", in.OrderID, store.ErrNotFound)
			}
			if status == string(acme.StatusProcessing) {
				return fmt.Errorf("storing the certificate of order %s: %w", in.OrderID, store.ErrUnauthorized)
			}
			return fmt.Errorf("storing the certificate of order %s: it is %s, not processing: %w", in.OrderID, status, store.ErrConflict)
		}
		if err != nil {
			return err
		}
		if n[inserted] != 1 { // unreachable: the swap made the row it reads
			return fmt.Errorf("storing certificate %s: order %s was not valid with it", c.Serial, in.OrderID)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.issuers.add(in.Certificate.IssuerID)
	return nil
}

func (s *Store) OrderFail(ctx context.Context, orderID string, p acme.Problem) error {
	return s.inTx(ctx, func(t *txn) error {
		return s.orderFail(ctx, t, orderID, p)
	})
}

func (s *Store) orderFail(ctx context.Context, t *txn, orderID string, p acme.Problem) error {
	pt, err := problemText(&p)
	if err != nil {
		return err
	}
	// The swap and its announcement in one round trip; a swap that moved
	// nothing returns an error, which rolls the announcement back.
	var b batch
	moved := b.exec("", orderFailSQL, orderID, pt)
	s.announce(&b, orderID)
	n, err := t.send(ctx, &b)
	if err != nil {
		return err
	}
	if n[moved] == 0 {
		o, err := s.orderByID(ctx, t, orderID)
		if err != nil {
			return err
		}
		return fmt.Errorf("failing order %s: it is %s, not processing (a verdict is terminal): %w", orderID, o.Status, store.ErrConflict)
	}
	return nil
}
