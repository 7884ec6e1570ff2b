package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// orderCols ends with the order's authorization IDs in position order,
// joined by commas, so one statement reads an order whole. IDs are
// randomID's base64url, which has no comma. string_agg with ORDER BY is
// both PostgreSQL's and SQLite's (3.44+).
const orderCols = `seq, id, account_id, status, identifiers, profile, not_before, not_after, expires_at, csr, cert_serial, error, replaces, created_at, updated_at,
  COALESCE((SELECT string_agg(authz_id, ',' ORDER BY position) FROM order_authz WHERE order_id = orders.id), '')`

// orderRow is an order row as scanned (dest), then decoded (finish).
type orderRow struct {
	o                                 store.Order
	seq                               int64
	status, idents, problem, authzIDs string
}

func (r *orderRow) dest() []any {
	o := &r.o
	return []any{&r.seq, &o.ID, &o.AccountID, &r.status, &r.idents, &o.Profile, tsNull(&o.NotBefore), tsNull(&o.NotAfter),
		ts(&o.Expires), &o.CSR, &o.CertSerial, &r.problem, &o.Replaces, ts(&o.CreatedAt), ts(&o.UpdatedAt), &r.authzIDs}
}

func (r *orderRow) finish() (*store.Order, error) {
	o := r.o
	o.Status = acme.Status(r.status)
	if len(o.CSR) == 0 {
		o.CSR = nil
	}
	if r.authzIDs != "" {
		o.AuthzIDs = strings.Split(r.authzIDs, ",")
	}
	if err := json.Unmarshal([]byte(r.idents), &o.Identifiers); err != nil {
		return nil, fmt.Errorf("decoding identifiers of order %s: %w", o.ID, err)
	}
	var err error
	o.Error, err = parseProblem(r.problem)
	return &o, err
}

func scanOrder(r interface{ Scan(...any) error }, seq *int64) (*store.Order, error) {
	var o orderRow
	if err := r.Scan(o.dest()...); err != nil {
		return nil, err
	}
	*seq = o.seq
	return o.finish()
}

// orderByIDSQL reads one order by id.
const orderByIDSQL = `SELECT ` + orderCols + ` FROM orders WHERE id = $1`

func (s *Store) orderByID(ctx context.Context, t *txn, id string) (*store.Order, error) {
	var seq int64
	o, err := scanOrder(t.queryRow(ctx, orderByIDSQL, id), &seq)
	if err != nil {
		return nil, fmt.Errorf("reading order %s: %w", id, err)
	}
	return o, nil
}

func (s *Store) OrderByID(ctx context.Context, id string) (*store.Order, error) {
	return autocommitted(ctx, s, func(t *txn) (*store.Order, error) { return s.orderByID(ctx, t, id) })
}

func (s *Store) OrdersByAccount(ctx context.Context, accountID string, p store.Page) ([]string, string, error) {
	ids, next, err := listPage(ctx, s, p, func(r Rows, seq *int64) (id string, err error) {
		err = r.Scan(seq, &id)
		return id, err
	}, nil,
		`SELECT seq, id FROM orders WHERE account_id = $1 AND seq < $2 ORDER BY seq DESC LIMIT $3`, accountID)
	if err != nil {
		return nil, "", fmt.Errorf("listing orders of account %s: %w", accountID, err)
	}
	return ids, next, nil
}

// ordersListSQL is OrdersList's statement for f, with its arguments
// before the page's (where.page). Each filter reaches its index:
// orders_account_idx or orders_status_idx, both (column, seq), so that a
// page is one range of it, or order_identifiers_value_idx. Alone, account
// or status is pinned to its index (where.pin); beside another filter it
// is a plain condition and the planner chooses where to start.
func ordersListSQL(f store.OrderFilter) (string, []any) {
	var w where
	alone := (f.AccountID != "") != (f.Status != "") && f.Identifier == ""
	switch {
	case f.AccountID != "" && alone:
		w.pin("account_id", f.AccountID)
	case f.AccountID != "":
		w.and(`account_id = $?`, f.AccountID)
	}
	if f.Identifier != "" {
		// The name's orders by their keys, then sorted: as EXISTS, a
		// semi-join, PostgreSQL was free to walk every order newest first
		// and probe each one's identifiers.
		w.and(`id {inlist} SELECT order_id FROM order_identifiers WHERE value = $? {endlist}`, f.Identifier)
	}
	switch {
	case f.Status != "" && alone:
		w.pin("status", string(f.Status))
	case f.Status != "":
		w.and(`status = $?`, string(f.Status))
	}
	return `SELECT ` + orderCols + ` FROM orders
` + w.page("seq"), w.args
}

func (s *Store) OrdersList(ctx context.Context, f store.OrderFilter, p store.Page) ([]*store.Order, string, error) {
	q, args := ordersListSQL(f)
	out, next, err := listPage(ctx, s, p, func(r Rows, seq *int64) (*store.Order, error) { return scanOrder(r, seq) }, nil, q, args...)
	if err != nil {
		return nil, "", fmt.Errorf("listing orders: %w", err)
	}
	return out, next, nil
}

// dbTime is t as the database stores and returns it: UTC, whole
// microseconds (both dialects drop the rest).
func dbTime(t time.Time) time.Time { return t.Truncate(time.Microsecond).UTC() }

func dbTimeP(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := dbTime(*t)
	return &v
}
