package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/hallmark-ca/hallmark/store"
)

// revocationInsertSQL is a certificate's CRL entry, from its row just
// revoked ($1 the serial): its shard and expiry ride along, so a shard's
// entries are read by revocations_shard_idx and leave it once expired.
const revocationInsertSQL = `INSERT INTO revocations (serial, issuer_id, revoked_at, reason, shard, not_after)
SELECT serial, issuer_id, revoked_at, revocation_reason, crl_shard, not_after FROM certificates WHERE serial = $1`

// crlEntryCols are a revocation's columns as scanRevocation reads them.
const crlEntryCols = `serial, issuer_id, revoked_at, reason, shard, listed_in IS NOT NULL`

// crlCurrent keeps the entries a CRL still lists at the time $N: an entry
// leaves once its certificate has expired and a stored CRL of its shard
// listed it (RFC 5280 §3.3 lets a CRL drop an expired certificate). An
// entry stored before migration 0026 with no expiry stays.
func crlCurrent(param string) string {
	return `NOT (listed_in IS NOT NULL AND not_after IS NOT NULL AND not_after < ` + param + `)`
}

func scanRevocation(r Rows) (store.Revocation, error) {
	var rv store.Revocation
	err := r.Scan(&rv.Serial, &rv.IssuerID, ts(&rv.RevokedAt), &rv.Reason, &rv.Shard, &rv.Listed)
	return rv, err
}

func (s *Store) revocationList(ctx context.Context, what, q string, args ...any) ([]store.Revocation, error) {
	var out []store.Revocation
	err := s.autocommit(ctx, func(t *txn) error {
		out = nil
		return collect(ctx, t, func(r Rows) error {
			rv, err := scanRevocation(r)
			if err == nil {
				out = append(out, rv)
			}
			return err
		}, q, args...)
	})
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", what, err)
	}
	return out, nil
}

// Revocations are the entries every shard of the issuer's CRL lists now,
// on the database's clock.
func (s *Store) Revocations(ctx context.Context, issuerID string) ([]store.Revocation, error) {
	return s.revocationList(ctx, "revocations of issuer "+issuerID,
		`SELECT `+crlEntryCols+` FROM revocations WHERE issuer_id = $1 AND `+crlCurrent("{now}")+` ORDER BY revoked_at, serial`, issuerID)
}

// CRLEntries are the entries the issuer's shard lists at asOf, by
// revocations_shard_idx: what its next CRL signs.
func (s *Store) CRLEntries(ctx context.Context, issuerID string, shard int, asOf time.Time) ([]store.Revocation, error) {
	return s.revocationList(ctx, fmt.Sprintf("revocations of issuer %s shard %d", issuerID, shard),
		`SELECT `+crlEntryCols+` FROM revocations WHERE issuer_id = $1 AND shard = $2 AND `+crlCurrent("$3")+` ORDER BY revoked_at, serial`,
		issuerID, shard, s.d.T(asOf))
}

// --- CRLs ---

// CRLStore saves a signed CRL of a shard, numbered above the shard's
// newest, and marks the serials it lists for the first time (c.Listed) in
// the same transaction.
func (s *Store) CRLStore(ctx context.Context, c store.CRL) error {
	return s.inTx(ctx, func(t *txn) error {
		var newest int64
		if err := t.queryRow(ctx, `SELECT COALESCE(MAX(number), 0) FROM crls WHERE issuer_id = $1 AND shard = $2`, c.IssuerID, c.Shard).Scan(&newest); err != nil {
			return err
		}
		if c.Number <= newest {
			return fmt.Errorf("storing CRL %d of issuer %s shard %d: the newest stored is %d and numbers must increase: %w", c.Number, c.IssuerID, c.Shard, newest, store.ErrConflict)
		}
		var b batch
		b.exec("", `INSERT INTO crls (issuer_id, shard, number, this_update, next_update, der) VALUES ($1, $2, $3, $4, $5, $6)`,
			c.IssuerID, c.Shard, c.Number, s.d.T(c.ThisUpdate), s.d.T(c.NextUpdate), nonNil(c.DER))
		// An issuer whose CRL the views judge is one they list (Issuers),
		// published or not.
		b.exec("", issuerRegisterSQL, c.IssuerID)
		for _, chunk := range chunks(c.Listed) {
			args := make([]any, 0, len(chunk)+1)
			args = append(args, c.Number)
			for _, sr := range chunk {
				args = append(args, sr)
			}
			b.exec("marking revocations listed", `UPDATE revocations SET listed_in = $1 WHERE listed_in IS NULL AND serial `+serialList(2, len(chunk)), args...)
		}
		_, err := t.send(ctx, &b)
		return err
	})
}

const crlCols = `issuer_id, shard, number, this_update, next_update, der`

func scanCRL(r interface{ Scan(...any) error }) (*store.CRL, error) {
	var c store.CRL
	if err := r.Scan(&c.IssuerID, &c.Shard, &c.Number, ts(&c.ThisUpdate), ts(&c.NextUpdate), &c.DER); err != nil {
		return nil, err
	}
	return &c, nil
}

// CRLLatest is the newest CRL of the issuer's shard 0, the one at the
// unsharded URL.
func (s *Store) CRLLatest(ctx context.Context, issuerID string) (*store.CRL, error) {
	return s.CRLShardLatest(ctx, issuerID, 0)
}

func (s *Store) CRLShardLatest(ctx context.Context, issuerID string, shard int) (*store.CRL, error) {
	var c *store.CRL
	err := s.autocommit(ctx, func(t *txn) error {
		var err error
		c, err = scanCRL(t.queryRow(ctx, `SELECT `+crlCols+` FROM crls WHERE issuer_id = $1 AND shard = $2 ORDER BY number DESC LIMIT 1`, issuerID, shard))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the newest CRL of issuer %s shard %d: %w", issuerID, shard, err)
	}
	return c, nil
}

// CRLShards is the newest CRL of each of the issuer's shards that has one,
// by shard.
func (s *Store) CRLShards(ctx context.Context, issuerID string) ([]*store.CRL, error) {
	var out []*store.CRL
	err := s.autocommit(ctx, func(t *txn) error {
		out = nil
		return collect(ctx, t, func(r Rows) error {
			c, err := scanCRL(r)
			if err == nil {
				out = append(out, c)
			}
			return err
		}, `SELECT `+crlCols+` FROM crls c WHERE issuer_id = $1
AND number = (SELECT MAX(number) FROM crls n WHERE n.issuer_id = c.issuer_id AND n.shard = c.shard) ORDER BY shard`, issuerID)
	})
	if err != nil {
		return nil, fmt.Errorf("reading the newest CRLs of issuer %s's shards: %w", issuerID, err)
	}
	return out, nil
}

// CRLNextNumber is one more than the shard's newest stored number (1 for
// none).
func (s *Store) CRLNextNumber(ctx context.Context, issuerID string, shard int) (int64, error) {
	var n int64
	err := s.autocommit(ctx, func(t *txn) error {
		return t.queryRow(ctx, `SELECT COALESCE(MAX(number), 0) + 1 FROM crls WHERE issuer_id = $1 AND shard = $2`, issuerID, shard).Scan(&n)
	})
	return n, err
}
