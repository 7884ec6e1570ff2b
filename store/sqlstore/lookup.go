package sqlstore

import (
	"strings"
	"unicode/utf8"

	"github.com/hallmark-ca/hallmark/store"
)

// lookup is a store.Lookup as one statement: each reads its rows, and
// found, once they are read, is the row or store.ErrNotFound. NonceConsume
// sends it in the nonce's own round trip (PostgreSQL: the same batch).
type lookup struct {
	sql   string
	args  []any
	each  func(Rows) error
	found func() (any, error)
}

// isolated is lk with a row it cannot read (a stored problem that does not
// parse, say) kept to itself: found reports it, and each lets the batch go
// on, so one bad row fails the requests that read it, not every request
// sharing the round trip.
func (lk *lookup) isolated() *lookup {
	if lk.each == nil {
		return lk
	}
	var rowErr error
	each, found := lk.each, lk.found
	return &lookup{sql: lk.sql, args: lk.args,
		each: func(r Rows) error {
			if rowErr == nil {
				rowErr = each(r)
			}
			return nil
		},
		found: func() (any, error) {
			if rowErr != nil {
				return nil, rowErr
			}
			return found()
		},
	}
}

// newLookup is l's statement; ok is false for LookupNone or an unknown
// kind, which read nothing. An ID no row can have (storable) finds nothing
// without a statement: on PostgreSQL it would fail the whole batch, the
// other requests' nonces with it.
func newLookup(l store.Lookup) (lk *lookup, ok bool) {
	if l.Kind != store.LookupNone && !storable(l.ID) {
		return &lookup{found: func() (any, error) { return nil, store.ErrNotFound }}, true
	}
	args := []any{l.ID}
	switch l.Kind {
	case store.LookupOrder:
		return oneRow(orderByIDSQL, args, func(r Rows) (*store.Order, error) {
			var seq int64
			return scanOrder(r, &seq)
		}), true
	case store.LookupAuthz:
		var ar authzRows
		return &lookup{sql: authzByIDSQL, args: args, each: ar.each,
			found: func() (any, error) { return foundOrNot(ar.out) },
		}, true
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
	return &lookup{sql: sql, args: args,
		each: func(r Rows) (err error) {
			v, err = scan(r)
			return err
		},
		found: func() (any, error) { return foundOrNot(v) },
	}
}

// foundOrNot is v as a Found, or store.ErrNotFound when the statement
// returned no row: never a typed nil in an interface.
func foundOrNot[T any](v *T) (any, error) {
	if v == nil {
		return nil, store.ErrNotFound
	}
	return v, nil
}

// storable reports whether s can be a text column's value: PostgreSQL
// refuses a NUL or invalid UTF-8 as a parameter, failing its statement.
func storable(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}
