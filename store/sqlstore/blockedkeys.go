package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/jobs/notify"
	"github.com/hallmark-ca/hallmark/store"
)

// blockKeySQL blocks key $1 (blocked_keys, migration 0012); a key blocked
// already keeps its first row, the first report of it.
const blockKeySQL = `INSERT INTO blocked_keys (spki_sha256, blocked_at, serial, why, actor) VALUES ($1, {now}, $2, $3, $4)
ON CONFLICT (spki_sha256) DO NOTHING`

const blockedKeySQL = `SELECT spki_sha256, blocked_at, serial, why, actor FROM blocked_keys WHERE spki_sha256 = $1`

// blockedSinceSQL is the keys blocked at $1 or later, by
// blocked_keys_at_idx: the sweep's few, not every key ever blocked.
const blockedSinceSQL = `SELECT spki_sha256, blocked_at, serial, why, actor FROM blocked_keys WHERE blocked_at >= $1 ORDER BY blocked_at`

// keySiblingsSQL is the unexpired, unrevoked certificates of key $1, by
// certificates_spki_idx (partial on spki_sha256 IS NOT NULL, which the
// equality implies): the key's own rows, never a scan of the table. The
// expiry is hidden from index choice (a CASE): with no statistics,
// PostgreSQL ANDed certificates_not_after_idx into the bitmap and read
// every live certificate's entry (TestFleetPlans, "key siblings").
const keySiblingsSQL = `SELECT ` + certCols + ` FROM certificates
WHERE spki_sha256 = $1 AND revoked_at IS NULL AND CASE WHEN not_after > {now} THEN 1 ELSE 0 END = 1 ORDER BY serial`

// nullBytes is b as a query argument, NULL when empty: a key hash not
// known is no key, never the empty one.
func nullBytes(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

func (s *Store) KeyBlockedBy(ctx context.Context, spkiHash []byte) (*store.BlockedKey, error) {
	out, err := autocommitted(ctx, s, func(t *txn) (*store.BlockedKey, error) { return s.keyBlocked(ctx, t, spkiHash) })
	if err != nil {
		return nil, fmt.Errorf("reading the block of key %x: %w", spkiHash, err)
	}
	return out, nil
}

func (s *Store) keyBlocked(ctx context.Context, t *txn, spkiHash []byte) (*store.BlockedKey, error) {
	if len(spkiHash) == 0 {
		return nil, store.ErrNotFound
	}
	var b store.BlockedKey
	if err := t.queryRow(ctx, blockedKeySQL, spkiHash).Scan(&b.SPKIHash, ts(&b.BlockedAt), &b.Serial, &b.Why, &b.Actor); err != nil {
		return nil, err
	}
	return &b, nil
}

// keysBlockedSQL is the blocked keys, the latest first (blocked_keys_at_idx),
// at most $1 of them.
const keysBlockedSQL = `SELECT spki_sha256, blocked_at, serial, why, actor FROM blocked_keys ORDER BY blocked_at DESC, spki_sha256 LIMIT $1`

func (s *Store) KeysBlocked(ctx context.Context, limit int) ([]store.BlockedKey, error) {
	if limit <= 0 {
		limit = math.MaxInt32
	}
	var out []store.BlockedKey
	err := s.autocommit(ctx, func(t *txn) error {
		out = nil
		return collect(ctx, t, func(r Rows) error {
			var b store.BlockedKey
			err := r.Scan(&b.SPKIHash, ts(&b.BlockedAt), &b.Serial, &b.Why, &b.Actor)
			out = append(out, b)
			return err
		}, keysBlockedSQL, limit)
	})
	if err != nil {
		return nil, fmt.Errorf("listing the blocked keys: %w", err)
	}
	return out, nil
}

func (s *Store) KeyBlock(ctx context.Context, k store.BlockedKey) (store.KeyBlockResult, error) {
	if len(k.SPKIHash) == 0 {
		return store.KeyBlockResult{}, errors.New("blocking a key: no key hash")
	}
	var out store.KeyBlockResult
	err := s.inTx(ctx, func(t *txn) (err error) {
		out, err = s.blockKey(ctx, t, k, "reported by "+k.Why)
		if err != nil {
			return err
		}
		b, err := s.keyBlocked(ctx, t, k.SPKIHash)
		if err != nil {
			return err
		}
		out.Key = *b
		return nil
	})
	if err != nil {
		return store.KeyBlockResult{}, fmt.Errorf("blocking key %x: %w", k.SPKIHash, err)
	}
	return out, nil
}

func (s *Store) KeyUnblock(ctx context.Context, spkiHash []byte, ev store.AuditEvent) error {
	if len(spkiHash) == 0 {
		return fmt.Errorf("unblocking a key: no key hash: %w", store.ErrNotFound)
	}
	err := s.inTx(ctx, func(t *txn) error {
		n, err := t.exec(ctx, `DELETE FROM blocked_keys WHERE spki_sha256 = $1`, spkiHash)
		if err != nil {
			return err
		}
		if n == 0 {
			return store.ErrNotFound
		}
		return s.audit(ctx, t, ev)
	})
	if err != nil {
		return fmt.Errorf("unblocking key %x: %w", spkiHash, err)
	}
	return nil
}

// keyHashOf is c's key hash: its column, or for a certificate stored
// before migration 0012 its DER's; nil when neither gives one (a DER that
// does not parse: nothing to block).
func keyHashOf(c *store.Certificate) []byte {
	if len(c.SPKIHash) > 0 {
		return c.SPKIHash
	}
	h, err := store.CertKeyHash(c.DER)
	if err != nil {
		return nil
	}
	return h
}

// compromised blocks the keys of certs, just revoked in t with reason
// keyCompromise by ev's actor, or queued for their backend to revoke so
// (RevokeQueue), and revokes each key's other certificates (blockKey):
// CA/B Forum BR §6.1.1.3 and §4.9.1.1. A certificate whose key cannot be
// read blocks nothing.
func (s *Store) compromised(ctx context.Context, t *txn, certs []*store.Certificate, ev store.AuditEvent) error {
	seen := map[string]bool{}
	for _, c := range certs {
		h := keyHashOf(c)
		if h == nil || seen[string(h)] {
			continue
		}
		seen[string(h)] = true
		why := fmt.Sprintf("the revocation of certificate %s with reason 1 (keyCompromise)", c.Serial)
		if ev.Detail != "" {
			why += ": " + ev.Detail
		}
		if _, err := s.blockKey(ctx, t, store.BlockedKey{SPKIHash: h, Serial: c.Serial, Why: why, Actor: ev.Actor},
			"reported compromised by the revocation of certificate "+c.Serial, certs...); err != nil {
			return err
		}
	}
	return nil
}

// blockKey blocks k in t, with its audit event when the row is new, and
// revokes the key's unexpired, unrevoked certificates with reason
// keyCompromise: Hallmark's own as RevokeMany does (revocation rows, one
// crl_generate per issuer), a relay's or custom backend's by a
// signer_revoke job on its profile's queue, as RevokeQueue does. Each
// certificate has an audit event whose detail says the key was reported
// (report: by what); the reporting certificates (reporters) are not its
// siblings, whether revoked already or queued for their backend. Result.Key
// is left for the caller.
func (s *Store) blockKey(ctx context.Context, t *txn, k store.BlockedKey, report string, reporters ...*store.Certificate) (store.KeyBlockResult, error) {
	var out store.KeyBlockResult
	n, err := t.exec(ctx, blockKeySQL, k.SPKIHash, k.Serial, k.Why, k.Actor)
	if err != nil {
		return out, fmt.Errorf("blocking the key: %w", err)
	}
	out.Already = n == 0
	hexKey := store.BlockedKey{SPKIHash: k.SPKIHash}.Hex()
	if !out.Already {
		if err := s.audit(ctx, t, store.AuditEvent{Actor: k.Actor, Action: store.ActionKeyBlock, Subject: hexKey, Detail: k.Why}); err != nil {
			return out, err
		}
	}
	siblings, err := s.keySiblings(ctx, t, k.SPKIHash)
	if err != nil {
		return out, err
	}
	siblings = slices.DeleteFunc(siblings, func(c *store.Certificate) bool {
		return slices.ContainsFunc(reporters, func(r *store.Certificate) bool { return r.Serial == c.Serial })
	})
	out.Revoked, out.Queued, err = s.revokeOfKey(ctx, t, k, siblings, report)
	return out, err
}

// keySiblings are the unexpired, unrevoked certificates of the key whose
// hash is h.
func (s *Store) keySiblings(ctx context.Context, t *txn, h []byte) ([]*store.Certificate, error) {
	var siblings []*store.Certificate
	if err := collect(ctx, t, func(r Rows) error {
		var seq int64
		c, err := scanCert(r, &seq)
		if err == nil {
			siblings = append(siblings, c)
		}
		return err
	}, keySiblingsSQL, h); err != nil {
		return nil, fmt.Errorf("finding the certificates of the key: %w", err)
	}
	return siblings, nil
}

// revokeOfKey revokes certs, certificates of key k (blocked), with reason
// keyCompromise: Hallmark's own as RevokeMany does, a relay's or custom
// backend's by signer_revoke, each audited as reported by report.
func (s *Store) revokeOfKey(ctx context.Context, t *txn, k store.BlockedKey, certs []*store.Certificate, report string) (revoked, queued []*store.Certificate, err error) {
	if len(certs) == 0 {
		return nil, nil, nil
	}
	ev := store.AuditEvent{Actor: k.Actor, Action: store.ActionKeyRevoke,
		Detail: fmt.Sprintf("reason 1 (keyCompromise): its key %s was %s", k.Hex(), report)}
	var local []string
	for _, c := range certs {
		if !store.RemoteIssuer(c.IssuerID) {
			local = append(local, c.Serial)
			continue
		}
		// Its backend's CA publishes its status: asked to revoke, as an
		// operator's revocation would (RevokeQueue). On the certificate's
		// own profile's queue: the store does not know which profiles
		// name its backend today (protocol/revocation does).
		one := ev
		one.Subject = c.Serial
		one.Detail += "; queued for its backend"
		if err := s.audit(ctx, t, one); err != nil {
			return nil, nil, err
		}
		if _, err := s.enqueueJob(ctx, t, jobs.SignerRevokeArgs{Serial: c.Serial, Profile: c.Profile, Reason: store.ReasonKeyCompromise}); err != nil {
			return nil, nil, err
		}
		queued = append(queued, c)
	}
	if len(local) == 0 {
		return nil, queued, nil
	}
	revoked, err = s.revokeManyRows(ctx, t, local, store.ReasonKeyCompromise)
	if err != nil {
		return nil, nil, fmt.Errorf("revoking the certificates of the key: %w", err)
	}
	if len(revoked) == 0 {
		return nil, queued, nil
	}
	if _, err := t.send(ctx, s.revokeManyRecords(revoked, ev)); err != nil {
		return nil, nil, err
	}
	if err := s.revokeManyJobs(ctx, t, revoked); err != nil {
		return nil, nil, err
	}
	if err := s.notifyCerts(ctx, t, notify.CertificateRevoked, revoked, ev); err != nil {
		return nil, nil, err
	}
	return revoked, queued, nil
}

func (s *Store) KeySweep(ctx context.Context, since time.Time, margin time.Duration) (store.KeyBlockResult, error) {
	var out store.KeyBlockResult
	err := s.inTx(ctx, func(t *txn) error {
		out = store.KeyBlockResult{}
		var keys []store.BlockedKey
		if err := collect(ctx, t, func(r Rows) error {
			var b store.BlockedKey
			err := r.Scan(&b.SPKIHash, ts(&b.BlockedAt), &b.Serial, &b.Why, &b.Actor)
			keys = append(keys, b)
			return err
		}, blockedSinceSQL, s.d.T(since)); err != nil {
			return fmt.Errorf("reading the keys blocked since %s: %w", since.UTC().Format(time.RFC3339), err)
		}
		for _, k := range keys {
			siblings, err := s.keySiblings(ctx, t, k.SPKIHash)
			if err != nil {
				return err
			}
			// Only what the block could not see: a certificate stored
			// before it (less the margin) was its to revoke, and one
			// still live is a relay's or custom backend's whose
			// revocation is queued or was refused.
			late := siblings[:0]
			for _, c := range siblings {
				if !c.IssuedAt.Before(k.BlockedAt.Add(-margin)) {
					late = append(late, c)
				}
			}
			if err := s.housekeepingRevoke(ctx, t, k, late, "while the certificate was being issued", &out); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return store.KeyBlockResult{}, fmt.Errorf("sweeping the certificates of keys blocked lately: %w", err)
	}
	return out, nil
}

// housekeepingRevoke revokes certs, certificates of blocked key k that its
// block could not find, as housekeeping (KeySweep, KeyHashBackfill), each
// audited as reported by k's block at its time and by its actor, "when"
// the block could not see them; and adds them to out.
func (s *Store) housekeepingRevoke(ctx context.Context, t *txn, k store.BlockedKey, certs []*store.Certificate, when string, out *store.KeyBlockResult) error {
	actor := k.Actor
	k.Actor = "housekeeping"
	revoked, queued, err := s.revokeOfKey(ctx, t, k, certs,
		fmt.Sprintf("blocked at %s (by %s) %s", k.BlockedAt.UTC().Format(time.RFC3339), actor, when))
	if err != nil {
		return err
	}
	out.Revoked = append(out.Revoked, revoked...)
	out.Queued = append(out.Queued, queued...)
	return nil
}

// unhashedSQL is the work list of KeyHashBackfill: certificates with no key
// hash, oldest first, by certificates_unhashed_idx (migration 0013), which
// holds those rows alone.
const unhashedSQL = `SELECT serial, der FROM certificates WHERE spki_sha256 IS NULL ORDER BY seq LIMIT $1`

func (s *Store) KeyHashBackfill(ctx context.Context, limit int) (int, store.KeyBlockResult, error) {
	var hashed int
	var out store.KeyBlockResult
	err := s.inTx(ctx, func(t *txn) error {
		hashed, out = 0, store.KeyBlockResult{}
		type row struct {
			serial string
			der    []byte
		}
		var rows []row
		if err := collect(ctx, t, func(r Rows) error {
			var x row
			err := r.Scan(&x.serial, &x.der)
			rows = append(rows, x)
			return err
		}, unhashedSQL, limit); err != nil {
			return fmt.Errorf("reading certificates with no key hash: %w", err)
		}
		keys := map[string]bool{}
		for _, x := range rows {
			h, err := store.CertKeyHash(x.der)
			if err != nil {
				h = []byte{} // not read again; matches no key
			} else {
				keys[string(h)] = true
			}
			if _, err := t.exec(ctx, `UPDATE certificates SET spki_sha256 = $2 WHERE serial = $1 AND spki_sha256 IS NULL`, x.serial, h); err != nil {
				return fmt.Errorf("recording the key hash of certificate %s: %w", x.serial, err)
			}
			hashed++
		}
		// A key blocked before its older certificates had a hash: the
		// block's search could not find them; revoke them now.
		for h := range keys {
			k, err := s.keyBlocked(ctx, t, []byte(h))
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			siblings, err := s.keySiblings(ctx, t, k.SPKIHash)
			if err != nil {
				return err
			}
			if err := s.housekeepingRevoke(ctx, t, *k, siblings, "before this certificate, stored before migration 0012, had its key recorded", &out); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, store.KeyBlockResult{}, fmt.Errorf("recording the key hashes of older certificates: %w", err)
	}
	return hashed, out, nil
}
