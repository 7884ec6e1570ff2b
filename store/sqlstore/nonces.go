package sqlstore

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hallmark-ca/hallmark/store"
)

const nonceKeyName = "nonce_key"

func (s *Store) NonceKey(ctx context.Context) ([]byte, error) {
	var key []byte
	err := s.inTx(ctx, func(t *txn) error {
		err := t.queryRow(ctx, `SELECT value FROM settings WHERE name = $1`, nonceKeyName).Scan(&key)
		if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		fresh := []byte(randomToken()) // 32 random bytes, base64url
		if _, err := t.exec(ctx, `INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`, nonceKeyName, fresh); err != nil {
			return err
		}
		return t.queryRow(ctx, `SELECT value FROM settings WHERE name = $1`, nonceKeyName).Scan(&key)
	})
	if err != nil {
		return nil, fmt.Errorf("reading the nonce key: %w", err)
	}
	return key, nil
}

// NonceEpoch reads the current nonce epoch, starting one if there is none:
// on a new database, and on PostgreSQL after a crash emptied the unlogged
// nonce tables. Concurrent starters agree: the first insert wins. On
// SQLite the epoch is this process's own (memNonces).
func (s *Store) NonceEpoch(ctx context.Context) (int64, error) {
	if s.mem != nil {
		return s.mem.current(), nil
	}
	var epoch int64
	err := s.inTx(ctx, func(t *txn) error {
		if _, err := t.exec(ctx, `INSERT INTO nonce_epoch (id, epoch) VALUES (1, $1) ON CONFLICT (id) DO NOTHING`, randomEpoch()); err != nil {
			return err
		}
		return t.queryRow(ctx, `SELECT epoch FROM nonce_epoch WHERE id = 1`).Scan(&epoch)
	})
	if err != nil {
		return 0, fmt.Errorf("reading the nonce epoch: %w", err)
	}
	return epoch, nil
}

// randomEpoch is a random non-zero epoch: a restarted epoch must not repeat
// an earlier one, or that earlier epoch's consumed nonces would come back.
func randomEpoch() int64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:]) // never fails (Go 1.24+)
		if e := int64(binary.BigEndian.Uint64(b[:]) >> 1); e != 0 {
			return e
		}
	}
}

// nonceConsumePG is the whole of NonceConsume on PostgreSQL: one statement,
// autocommitted, so a batch costs one round trip and one WAL flush. The
// INSERT's RETURNING names the nonces this statement consumed; a nonce
// consumed before conflicts and is not returned. Accounts are joined by id
// (every column coalesced, so a use that names none scans as id ""). Only
// nonces of the current epoch are inserted, and every row carries that
// epoch (0 when the table is empty) so the frontend learns of a new one.
// Both tables are unlogged: the statement commits without a WAL flush.
const nonceConsumePG = `WITH input AS (
    SELECT u.nonce, u.expires_at, u.account_id, u.epoch, u.ord
    FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::bigint[]) WITH ORDINALITY AS u(nonce, expires_at, account_id, epoch, ord)
), cur AS (
    SELECT epoch FROM nonce_epoch WHERE id = 1
), fresh AS (
    INSERT INTO nonces_consumed (nonce, expires_at)
    SELECT i.nonce, i.expires_at FROM input i JOIN cur ON cur.epoch = i.epoch
    ON CONFLICT (nonce) DO NOTHING
    RETURNING nonce
)
SELECT f.nonce IS NOT NULL, now(), coalesce((SELECT epoch FROM cur), 0),
       coalesce(a.seq, 0), coalesce(a.id, ''), coalesce(a.key_jwk, ''), coalesce(a.thumbprint, ''),
       coalesce(a.contact, '[]'), coalesce(a.status, ''), coalesce(a.terms_agreed, false), coalesce(a.created_at, now())
FROM input i
LEFT JOIN fresh f ON f.nonce = i.nonce
LEFT JOIN accounts a ON a.id = i.account_id AND i.account_id <> ''
ORDER BY i.ord`

// nonceConsumeOnePG is nonceConsumePG for a batch of one, the usual batch
// when requests are few: the same answer without the arrays, ordinality
// and joins that a batch needs, ~60 µs less of PostgreSQL's time a request
// (measured one at a time, 2 ms apart).
const nonceConsumeOnePG = `WITH cur AS (
    SELECT epoch FROM nonce_epoch WHERE id = 1
), fresh AS (
    INSERT INTO nonces_consumed (nonce, expires_at)
    SELECT $1, $2 FROM cur WHERE cur.epoch = $4
    ON CONFLICT (nonce) DO NOTHING
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM fresh), now(), coalesce((SELECT epoch FROM cur), 0),
       coalesce(a.seq, 0), coalesce(a.id, ''), coalesce(a.key_jwk, ''), coalesce(a.thumbprint, ''),
       coalesce(a.contact, '[]'), coalesce(a.status, ''), coalesce(a.terms_agreed, false), coalesce(a.created_at, now())
FROM (SELECT 1) AS one
LEFT JOIN accounts a ON a.id = $3 AND $3 <> ''`

func (s *Store) NonceConsume(ctx context.Context, uses []store.NonceUse) ([]store.NonceUsed, error) {
	return s.NonceConsumeMeanwhile(ctx, uses, nil)
}

// NonceConsumeMeanwhile is store.NoncesMeanwhile's. On SQLite, where the
// consumption is this process's own work with no round trip, meanwhile
// runs first.
func (s *Store) NonceConsumeMeanwhile(ctx context.Context, uses []store.NonceUse, meanwhile func()) ([]store.NonceUsed, error) {
	out := make([]store.NonceUsed, len(uses))
	// An account ID no account can have (a NUL from a JSON "kid") names
	// none: as a PostgreSQL parameter it would fail the batch, and with it
	// every other request in it.
	unstorable := func(u store.NonceUse) bool { return !store.Storable(u.AccountID) }
	if slices.ContainsFunc(uses, unstorable) {
		uses = slices.Clone(uses) // the caller's slice stays as it was
		for i := range uses {
			if unstorable(uses[i]) {
				uses[i].AccountID = ""
			}
		}
	}
	// A nonce twice in one batch is a replay racing its original: only the
	// first use is sent; the statement could not tell the two apart.
	var send []int
	seen := make(map[string]bool, len(uses))
	for i, u := range uses {
		if !seen[u.Nonce] {
			seen[u.Nonce] = true
			send = append(send, i)
		}
	}
	var err error
	if s.mem != nil {
		if meanwhile != nil {
			meanwhile()
		}
		err = s.nonceConsumeMem(ctx, uses, send, out)
	} else {
		err = s.nonceConsumePG(ctx, uses, send, out, meanwhile)
	}
	if err != nil {
		return nil, fmt.Errorf("consuming %d nonces: %w", len(send), err)
	}
	for i := range out {
		if out[i].Now.IsZero() && len(send) > 0 {
			out[i].Now, out[i].Epoch = out[send[0]].Now, out[send[0]].Epoch // a duplicate, not sent
		}
	}
	// The duplicates stay Fresh == false with no account: they are refused
	// for their nonce before their account matters.
	return out, nil
}

func (s *Store) nonceConsumePG(ctx context.Context, uses []store.NonceUse, send []int, out []store.NonceUsed, meanwhile func()) error {
	q, args := nonceConsumePG, []any(nil)
	if len(send) == 1 {
		u := uses[send[0]]
		q, args = nonceConsumeOnePG, []any{u.Nonce, u.Expires.UTC(), u.AccountID, u.Epoch}
	} else {
		nonces := make([]string, len(send))
		expires := make([]time.Time, len(send))
		accounts := make([]string, len(send))
		epochs := make([]int64, len(send))
		for j, i := range send {
			nonces[j], expires[j], accounts[j], epochs[j] = uses[i].Nonce, uses[i].Expires.UTC(), uses[i].AccountID, uses[i].Epoch
		}
		args = []any{nonces, expires, accounts, epochs}
	}
	return s.autocommit(ctx, func(t *txn) error {
		// The lookups go in the same round trip: one batch, one implicit
		// transaction. An ID no row can have, or a row that cannot be
		// read, fails its own lookup only (newLookup), never the batch
		// with the other requests in it. Made here, so that an attempt
		// made again starts them afresh.
		var looks []*lookup
		var lookFor []int // the use each of looks answers
		for _, i := range send {
			if lk, ok := s.newLookup(uses[i].Lookup); ok {
				looks, lookFor = append(looks, lk), append(lookFor, i)
			}
		}
		j := 0
		each := func(r Rows) error {
			if j >= len(send) {
				return errors.New("more answers than nonces")
			}
			var fresh bool
			var now time.Time
			var epoch, seq int64
			var a store.Account
			var jwk, contact, status string
			if err := r.Scan(&fresh, ts(&now), &epoch, &seq, &a.ID, &jwk, &a.Thumbprint, &contact, &status, &a.TermsAgreed, ts(&a.CreatedAt)); err != nil {
				return err
			}
			u := &out[send[j]]
			u.Fresh, u.Now, u.Epoch = fresh, now, epoch
			if a.ID != "" {
				// An account that does not decode fails its own request
				// (AccountErr), not the batch.
				u.Account, u.AccountErr = accountFromColumns(a, jwk, contact, status)
			}
			j++
			return nil
		}
		// Alone, the statement goes as a query of its own; with work to
		// run meanwhile, as a batch of one, which the driver can send and
		// read apart.
		if len(looks) == 0 && meanwhile == nil {
			return collect(ctx, t, each, q, args...)
		}
		var b batch
		b.each("", each, q, args...)
		for _, lk := range looks {
			if lk.sql != "" {
				b.each("", lk.each, lk.sql, lk.args...)
			}
		}
		if _, err := t.sendMeanwhile(ctx, &b, meanwhile); err != nil {
			return err
		}
		for k, lk := range looks {
			out[lookFor[k]].Found, out[lookFor[k]].FoundErr = lk.found()
		}
		return nil
	})
}

// nonceConsumeMem is NonceConsume on SQLite: the nonces are consumed in
// memory (memNonces), and the accounts and lookups read with autocommitted
// statements, which take no write lock.
func (s *Store) nonceConsumeMem(ctx context.Context, uses []store.NonceUse, send []int, out []store.NonceUsed) error {
	now := time.Now()
	for _, i := range send {
		out[i].Fresh, out[i].Epoch = s.mem.consume(uses[i].Nonce, uses[i].Epoch, uses[i].Expires, now)
	}
	return s.autocommit(ctx, func(t *txn) error {
		var dbNow time.Time
		if err := t.queryRow(ctx, `SELECT {now}`).Scan(ts(&dbNow)); err != nil {
			return err
		}
		for _, i := range send {
			u := uses[i]
			out[i].Now = dbNow
			if u.AccountID != "" {
				a, err := s.accountByID(ctx, t, u.AccountID)
				switch {
				case errors.Is(err, store.ErrNotFound):
				case errors.Is(err, errUndecodable):
					out[i].AccountErr = err
				case err != nil:
					return err
				default:
					out[i].Account = a
				}
			}
			if lk, ok := s.newLookup(u.Lookup); ok {
				if lk.sql != "" {
					if err := collect(ctx, t, lk.each, lk.sql, lk.args...); err != nil {
						return err
					}
				}
				out[i].Found, out[i].FoundErr = lk.found()
			}
		}
		return nil
	})
}

// nonceGCGrace is how long past its expiry a consumed nonce is kept.
const nonceGCGrace = time.Minute

// NonceGC forgets consumed nonces past their expiry. On SQLite the set in
// this process's memory is swept (the frontend also sweeps its own as it
// goes: memNonces), and rows left in the table by versions that kept the
// set there are deleted.
//
// A consumed nonce is remembered nonceGCGrace past its expiry: a frontend
// checks expiry on its own clock, which may run behind the database's by
// up to the nonce skew frontends tolerate (protocol/nonce.Skew, 30 s), and
// to that frontend a nonce forgotten at its expiry on the database clock
// would still be fresh: a replay accepted.
func (s *Store) NonceGC(ctx context.Context) (int64, error) {
	var n int64
	if s.mem != nil {
		n = int64(s.mem.sweep(time.Now().Add(-nonceGCGrace)))
	}
	err := s.inTx(ctx, func(t *txn) error {
		deleted, err := t.exec(ctx, `DELETE FROM nonces_consumed WHERE expires_at < {now+$1}`, -nonceGCGrace.Microseconds())
		n += deleted
		return err
	})
	return n, err
}
