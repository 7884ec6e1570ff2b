package sqlstore

import (
	"slices"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// lookup is a store.Lookup as one statement: each reads its rows, and
// found, once they are read, is the row or why there is none.
// NonceConsume sends it in the nonce's own round trip (PostgreSQL: the
// same batch), so each never fails: a row it cannot read (a stored
// problem that does not parse, say) is kept for found, and fails the
// request that read it, not every request sharing the round trip.
type lookup struct {
	sql    string // "" when there is nothing to ask (an ID no row can have)
	args   []any
	each   func(Rows) error
	found  func() (any, error)
	rowErr error
}

// newLookup is l's statement; ok is false for LookupNone or an unknown
// kind, which read nothing. An ID no row can have (store.Storable) finds
// nothing without a statement: on PostgreSQL it would fail the whole
// batch, the other requests' nonces with it.
func (s *Store) newLookup(l store.Lookup) (lk *lookup, ok bool) {
	if l.Kind != store.LookupNone && !store.Storable(l.ID) {
		return &lookup{found: func() (any, error) { return nil, store.ErrNotFound }}, true
	}
	args := []any{l.ID}
	switch l.Kind {
	case store.LookupReusable:
		// Keys a client sent: one no text column can hold (or more than
		// one statement's worth) is left to the handler's own read.
		if len(l.Keys) == 0 || len(l.Keys) > reusableChunk || slices.ContainsFunc(l.Keys, func(k store.AuthzKey) bool {
			return !store.Storable(k.Identifier.Value) || !store.Storable(string(k.Identifier.Type))
		}) || slices.ContainsFunc(l.Methods, func(m acme.ChallengeType) bool { return !store.Storable(string(m)) }) {
			return nil, false
		}
		found := make([]authzRows, len(l.Keys))
		q, args := s.reusableSQL(l.ID, l.Keys, l.Methods, l.After)
		return isolated(q, args, reusableRows(found), func() (any, error) { return reusableFound(found), nil }), true
	case store.LookupOrder:
		return oneRow(orderByIDSQL, args, func(r Rows) (*store.Order, error) {
			var seq int64
			return scanOrder(r, &seq)
		}), true
	case store.LookupAuthz:
		var ar authzRows
		return isolated(authzByIDSQL, args, ar.each, func() (any, error) { return foundOrNot(ar.out) }), true
	case store.LookupChallenge:
		return oneRow(challengeAuthzSQL, args, func(r Rows) (*store.ChallengeAuthz, error) {
			return scanChallengeAuthz(r)
		}), true
	case store.LookupCert:
		return oneRow(certBySerialSQL, args, func(r Rows) (*store.Certificate, error) {
			var seq int64
			return scanCert(r, &seq)
		}), true
	}
	return nil, false
}

// oneRow is the lookup of a query returning at most one row, read by scan.
func oneRow[T any](sql string, args []any, scan func(Rows) (*T, error)) *lookup {
	var v *T
	return isolated(sql, args,
		func(r Rows) (err error) {
			v, err = scan(r)
			return err
		},
		func() (any, error) { return foundOrNot(v) })
}

// isolated is the lookup reading sql's rows with each and answering with
// found, a row's read error kept to itself (lookup).
func isolated(sql string, args []any, each func(Rows) error, found func() (any, error)) *lookup {
	lk := &lookup{sql: sql, args: args}
	lk.each = func(r Rows) error {
		if lk.rowErr == nil {
			lk.rowErr = each(r)
		}
		return nil
	}
	lk.found = func() (any, error) {
		if lk.rowErr != nil {
			return nil, lk.rowErr
		}
		return found()
	}
	return lk
}

// foundOrNot is v as a Found, or store.ErrNotFound when the statement
// returned no row: never a typed nil in an interface.
func foundOrNot[T any](v *T) (any, error) {
	if v == nil {
		return nil, store.ErrNotFound
	}
	return v, nil
}
