package sqlstore

import (
	"fmt"
	"strconv"
	"strings"
)

// where is the WHERE clause of an operator's filtered list, made of the
// conditions of the filters that are set and nothing else.
//
// Written once for every filter, as
//
//	($1 = '' OR account_id = $1) AND ($2 = '' OR status = $2) AND ...
//
// a list is one statement whichever filters are set. Its generic plan
// (which PostgreSQL may switch a prepared statement to after five runs) is
// made for all of them at once and reaches no filter's index: it read a
// fleet's tens of thousands of rows newest first to find a small
// account's five (TestFleetListPlans). Built from the filters that are
// set, a statement names only what it filters on, and each condition can
// reach its index (pin and page keep it there whatever the statistics).
// A list has a few filters, so it builds at most 2^n statements: the
// dialect's expansion cache and the driver's statement cache stay bounded.
type where struct {
	conds []string
	args  []any
	lead  string // the pinned column (pin), "" for none
}

// and adds cond. Each "$?" in cond is the placeholder of the next of args,
// in order.
func (w *where) and(cond string, args ...any) {
	if n := strings.Count(cond, "$?"); n != len(args) {
		panic(fmt.Sprintf("where: %q has %d placeholders for %d arguments", cond, n, len(args)))
	}
	for _, a := range args {
		w.args = append(w.args, a)
		cond = strings.Replace(cond, "$?", "$"+strconv.Itoa(len(w.args)), 1)
	}
	w.conds = append(w.conds, cond)
}

// pin adds col = arg for a list whose only indexed filter it is, where an
// index on (col, the list's key) exists, written so that index serves the
// page whatever PostgreSQL estimates: as the range col >= arg AND col <= arg
// (the same rows; the dialect's {pin}), with col leading the ORDER BY
// (page).
//
// As col = $1, a generic plan expects 1/n of the table for n distinct
// values: half of it with a fleet's account and a small one. It then reads
// the list's key newest first and keeps the matching rows, all of the
// fleet's to find the small account's five; and since an equality makes
// col constant, ORDER BY col, key is to the planner ORDER BY key, which the
// primary key gives as well. A range is estimated narrow (0.5% in a generic
// plan, from the statistics in a custom one) and leaves col in the ORDER
// BY, which only the (col, key) index gives without a sort: the page is
// one backward range of it, however many rows arg has.
func (w *where) pin(col string, arg any) {
	w.and(`{pin:`+col+`:$?}`, arg)
	w.lead = col
}

// sql is "WHERE cond AND cond ...", or "" when no filter is set.
func (w *where) sql() string {
	if len(w.conds) == 0 {
		return ""
	}
	return "WHERE " + strings.Join(w.conds, "\n  AND ")
}

// page ends a newest-first keyset statement over key as listPage runs it:
// the conditions, key below the page's bound, ORDER BY the pinned column
// (if any) and key, descending, and the row limit. listPage appends the
// bound and the limit to w's arguments.
//
// The limit is a subquery, so PostgreSQL plans without knowing it, as for
// a generic plan: expecting to stop early, it reads the filter's index in
// order. Known (51), and above the rows it expects of a table it has no
// statistics for (0.5% of them for an equality), it read every one of an
// account's 20,000 certificates through a bitmap and sorted them to keep
// the newest 51.
func (w *where) page(key string) string {
	conds := append(w.conds[:len(w.conds):len(w.conds)], key+" < $"+strconv.Itoa(len(w.args)+1))
	order := key + " DESC"
	if w.lead != "" {
		order = w.lead + " DESC, " + order
	}
	return "WHERE " + strings.Join(conds, "\n  AND ") +
		"\nORDER BY " + order + " LIMIT (SELECT CAST($" + strconv.Itoa(len(w.args)+2) + " AS bigint))"
}
