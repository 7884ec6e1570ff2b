package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// --- reading ---

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
	var out *store.Order
	err := s.autocommit(ctx, func(t *txn) (err error) {
		out, err = s.orderByID(ctx, t, id)
		return err
	})
	return out, err
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

// selectAuthz reads an authorization with its challenges in position order,
// one row per challenge. The LEFT JOIN keeps an authorization that has none
// as one row whose challenge columns are empty. The query goes on with the
// authorization's id (or a subquery choosing it).
const selectAuthz = `SELECT ` + authzChallengeCols + `
FROM authorizations a LEFT JOIN challenges c ON c.authz_id = a.id
WHERE a.id = `

// authzChallengeCols are a selectAuthz row's columns (scanAuthzRow).
const authzChallengeCols = `a.id, a.account_id, a.identifier_type, a.identifier_value, a.wildcard, a.status, a.expires_at, a.created_at,
  COALESCE(c.id, ''), COALESCE(c.authz_id, ''), COALESCE(c.type, ''), COALESCE(c.token, ''), COALESCE(c.status, ''),
  c.validated_at, COALESCE(c.error, ''), COALESCE(c.validation_record, '')`

// readAuthz runs a selectAuthz query; no rows is store.ErrNotFound.
func readAuthz(ctx context.Context, t *txn, q string, args ...any) (*store.Authorization, error) {
	var r authzRows
	if err := collect(ctx, t, r.each, q, args...); err != nil {
		return nil, err
	}
	return r.result()
}

// scanAuthzRow scans one row of authzChallengeCols, after lead (columns the
// query puts first): the authorization, and its challenge when it has one.
func scanAuthzRow(r Rows, lead ...any) (*store.Authorization, *store.Challenge, error) {
	var a store.Authorization
	var typ, status string
	var c challengeRow
	if err := r.Scan(append(append(lead, &a.ID, &a.AccountID, &typ, &a.Identifier.Value, &a.Wildcard, &status, ts(&a.Expires), ts(&a.CreatedAt)),
		c.dest()...)...); err != nil {
		return nil, nil, err
	}
	a.Identifier.Type = acme.IdentifierType(typ)
	a.Status = acme.Status(status)
	if c.c.ID == "" {
		return &a, nil, nil // no challenges
	}
	ch, err := c.finish()
	if err != nil {
		return nil, nil, err
	}
	return &a, ch, nil
}

// authzRows gathers a selectAuthz query's rows: the authorization from the
// first, a challenge from each.
type authzRows struct{ out *store.Authorization }

func (ar *authzRows) each(r Rows) error {
	a, ch, err := scanAuthzRow(r)
	if err != nil {
		return err
	}
	ar.add(a, ch)
	return nil
}

// add is one row of the authorization: the first row's authorization
// stands for all of them, and each row adds its challenge, if any.
func (ar *authzRows) add(a *store.Authorization, ch *store.Challenge) {
	if ar.out == nil {
		ar.out = a
	}
	if ch != nil {
		ar.out.Challenges = append(ar.out.Challenges, *ch)
	}
}

// result is the authorization read; no rows is store.ErrNotFound.
func (ar *authzRows) result() (*store.Authorization, error) {
	if ar.out == nil {
		return nil, store.ErrNotFound
	}
	return ar.out, nil
}

// authzByIDSQL reads one authorization by id.
const authzByIDSQL = selectAuthz + `$1 ORDER BY c.position`

func (s *Store) authzByID(ctx context.Context, t *txn, id string) (*store.Authorization, error) {
	a, err := readAuthz(ctx, t, authzByIDSQL, id)
	if err != nil {
		return nil, fmt.Errorf("reading authorization %s: %w", id, err)
	}
	return a, nil
}

func (s *Store) AuthzByID(ctx context.Context, id string) (*store.Authorization, error) {
	var out *store.Authorization
	err := s.autocommit(ctx, func(t *txn) (err error) {
		out, err = s.authzByID(ctx, t, id)
		return err
	})
	return out, err
}

// reusableChunk is how many identifiers one AuthzsReusable statement
// asks about: four parameters each, well under SQLite's limit of 32,766.
const reusableChunk = 500

// AuthzsReusable is a read: it runs autocommitted, choosing each key's
// authorization and reading it with its challenges in one statement for
// all of them (per reusableChunk keys), not one per identifier: a
// newOrder of 100 names asks once. A newOrder of at most reusableChunk
// names asks with its nonce instead (LookupReusable, newLookup).
func (s *Store) AuthzsReusable(ctx context.Context, accountID string, keys []store.AuthzKey, methods []acme.ChallengeType, minExpiry time.Time) ([]*store.Authorization, error) {
	found := make([]authzRows, len(keys))
	err := s.autocommit(ctx, func(t *txn) error {
		for lo := 0; lo < len(keys); lo += reusableChunk {
			chunk := keys[lo:min(lo+reusableChunk, len(keys))]
			q, args := s.reusableSQL(accountID, chunk, methods, minExpiry)
			if err := collect(ctx, t, reusableRows(found[lo:lo+len(chunk)]), q, args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("finding reusable authorizations: %w", err)
	}
	return reusableFound(found), nil
}

// reusableSQL is the statement answering keys (at most reusableChunk):
// the keys are a VALUES list, and each chooses its authorization with a
// correlated subquery, which both PostgreSQL and SQLite plan as an index
// lookup per key: authorizations_reuse_idx's range of the key's name.
// The status is hidden from index choice (concatenated with an empty
// string, as the verdict's statements do): on statistics
// that do not know an account's authorizations became valid (never
// analyzed, or not since), PostgreSQL chose authorizations_account_status_idx
// and walked every valid authorization of the account for each key, 20,000
// of them for a fleet's account (TestReusablePlans). Its rows carry the
// key's index in keys first. With
// methods non-nil, a candidate counts only if it has a valid challenge of
// one of those types, or no challenge at all (born valid): an EXISTS on
// challenges_authz_idx for each of the key's few candidates.
func (s *Store) reusableSQL(accountID string, keys []store.AuthzKey, methods []acme.ChallengeType, minExpiry time.Time) (string, []any) {
	var q strings.Builder
	args := []any{accountID, s.d.T(minExpiry)}
	method := ""
	if methods != nil {
		method = `
    AND (NOT EXISTS (SELECT 1 FROM challenges v WHERE v.authz_id = r.id)`
		if len(methods) > 0 {
			method += `
      OR EXISTS (SELECT 1 FROM challenges v WHERE v.authz_id = r.id AND v.status = 'valid' AND v.type IN (`
			for i, m := range methods {
				if i > 0 {
					method += ", "
				}
				args = append(args, string(m))
				method += fmt.Sprintf("CAST($%d AS TEXT)", len(args))
			}
			method += "))"
		}
		method += ")"
	}
	q.WriteString("WITH want (i, typ, val, wc) AS (VALUES ")
	for i, k := range keys {
		if i > 0 {
			q.WriteString(", ")
		}
		n := len(args)
		fmt.Fprintf(&q, "(CAST($%d AS INTEGER), CAST($%d AS TEXT), CAST($%d AS TEXT), CAST($%d AS BOOLEAN))", n+1, n+2, n+3, n+4)
		args = append(args, i, string(k.Identifier.Type), k.Identifier.Value, k.Wildcard)
	}
	q.WriteString(`)
SELECT w.i, ` + authzChallengeCols + `
FROM want w
JOIN authorizations a ON a.id = (SELECT r.id FROM authorizations r
  WHERE r.account_id = $1 AND r.identifier_type = w.typ AND r.identifier_value = w.val AND r.wildcard = w.wc
    AND r.status || '' = 'valid' AND r.expires_at > $2 AND r.expires_at > {now}` + method + `
  ORDER BY r.expires_at DESC LIMIT 1)
LEFT JOIN challenges c ON c.authz_id = a.id
ORDER BY w.i, c.position`)
	return q.String(), args
}

// reusableRows reads reusableSQL's rows into found, one per key asked.
func reusableRows(found []authzRows) func(Rows) error {
	return func(r Rows) error {
		var i int
		a, ch, err := scanAuthzRow(r, &i)
		if err != nil {
			return err
		}
		if i < 0 || i >= len(found) {
			return fmt.Errorf("a reusable authorization for key %d, not asked for", i)
		}
		found[i].add(a, ch)
		return nil
	}
}

// reusableFound is found as AuthzsReusable answers it.
func reusableFound(found []authzRows) []*store.Authorization {
	out := make([]*store.Authorization, len(found))
	for i := range found {
		out[i] = found[i].out
	}
	return out
}

const challengeCols = `id, authz_id, type, token, status, validated_at, error, validation_record`

// challengeRow holds the columns of challengeCols while they are scanned.
type challengeRow struct {
	c                            store.Challenge
	typ, status, problem, record string
}

func (r *challengeRow) dest() []any {
	return []any{&r.c.ID, &r.c.AuthzID, &r.typ, &r.c.Token, &r.status, tsNull(&r.c.Validated), &r.problem, &r.record}
}

func (r *challengeRow) finish() (*store.Challenge, error) {
	c := r.c
	c.Type = acme.ChallengeType(r.typ)
	c.Status = acme.Status(r.status)
	if r.record != "" {
		c.ValidationRecord = json.RawMessage(r.record)
	}
	var err error
	c.Error, err = parseProblem(r.problem)
	return &c, err
}

func scanChallenge(r interface{ Scan(...any) error }) (*store.Challenge, error) {
	var c challengeRow
	if err := r.Scan(c.dest()...); err != nil {
		return nil, err
	}
	return c.finish()
}

func (s *Store) challengeByID(ctx context.Context, t *txn, id string) (*store.Challenge, error) {
	c, err := scanChallenge(t.queryRow(ctx, `SELECT `+challengeCols+` FROM challenges WHERE id = $1`, id))
	if err != nil {
		return nil, fmt.Errorf("reading challenge %s: %w", id, err)
	}
	return c, nil
}

func (s *Store) ChallengeByID(ctx context.Context, id string) (*store.Challenge, error) {
	var out *store.Challenge
	err := s.autocommit(ctx, func(t *txn) (err error) {
		out, err = s.challengeByID(ctx, t, id)
		return err
	})
	return out, err
}

// --- creating ---

// OrderCreate writes the order, its identifiers, its new authorizations and
// their challenges and the links between them with one multi-row INSERT
// per table, and returns the order as built here: what it wrote is what
// orderByID would read back, apart from the database clock's times, which
// come back from the INSERT.
func (s *Store) OrderCreate(ctx context.Context, o store.NewOrder) (*store.Order, error) {
	d, err := draftOrder(o)
	if err != nil {
		return nil, err
	}
	var out *store.Order
	err = s.inTx(ctx, func(t *txn) error {
		// Reused authorizations are checked first: that is the one read,
		// and every write after it needs no result of another, so they go
		// in one batch (on PostgreSQL one round trip, with BEGIN when
		// nothing is reused).
		if d.reusing {
			if err := checkReuse(ctx, t, o); err != nil {
				return err
			}
		}
		var b batch
		ord := s.queueOrder(&b, o, d)
		ready := -1
		if d.reusing {
			ready = b.exec("", `UPDATE orders SET status = 'ready' WHERE id = $1 AND NOT EXISTS (
  SELECT 1 FROM order_authz oa JOIN authorizations a ON a.id = oa.authz_id
  WHERE oa.order_id = orders.id AND a.status <> 'valid')`, ord.ID)
		}
		send := t.sendLast // on PostgreSQL the order commits in this round trip
		if o.ReplacesSerial != "" {
			send = t.send // s.replace below still has statements to run
		}
		n, err := send(ctx, &b)
		if err != nil {
			return err
		}
		if ready >= 0 && n[ready] == 1 {
			ord.Status = acme.StatusReady
		}
		if o.ReplacesSerial != "" { // RFC 9773 §5; store/sqlstore/ari.go
			if err := s.replace(ctx, t, o.ReplacesSerial, o.AccountID, ord.ID); err != nil {
				return err
			}
		}
		out = ord
		return nil
	})
	return out, err
}

// OrderCreateSigned is OrderCreate folded with its request's nonce
// (signedChecks), for an order whose authorizations are all new. Two more
// checks go in front of the order's rows, each failing the transaction
// when it finds nothing (mustMove): the database's clock is within
// store.ClockSlack of clock, which o's times were computed from, and the
// account has no authorization for o's identifiers that the ordinary path
// would reuse (reusableSQL, for o.Expires). Then everything and the COMMIT
// go in one round trip. An order that replaces a certificate, or names
// more identifiers than one reusable read asks about, is not folded.
func (s *Store) OrderCreateSigned(ctx context.Context, u store.SignedUse, o store.NewOrder, clock time.Time) (*store.Order, error) {
	if !s.Folds() || !store.Storable(u.AccountID) || o.AccountID != u.AccountID ||
		o.ReplacesSerial != "" || len(o.Authzs) == 0 || len(o.Authzs) > reusableChunk {
		return nil, store.ErrUnfolded
	}
	d, err := draftOrder(o)
	if err != nil {
		return nil, err
	}
	if d.reusing {
		return nil, store.ErrUnfolded
	}
	keys := make([]store.AuthzKey, len(o.Authzs))
	for i, a := range o.Authzs {
		keys[i] = store.AuthzKey{Identifier: a.Identifier, Wildcard: a.Wildcard}
	}
	var out *store.Order
	err = s.inTx(ctx, func(t *txn) error {
		var one int
		b := signedChecks(u)
		b.scan("", []any{&one}, `SELECT 1 WHERE {now} BETWEEN $1 AND $2`,
			s.d.T(clock.Add(-store.ClockSlack)), s.d.T(clock.Add(store.ClockSlack)))
		reused, args := s.reusableSQL(u.AccountID, keys, o.Methods, o.Expires)
		b.scan("", []any{&one}, `SELECT 1 WHERE NOT EXISTS (`+reused+`)`, args...)
		checks := make([]int, len(b.stmts))
		for i := range checks {
			checks[i] = i
		}
		ord := s.queueOrder(&b, o, d)
		must := mustMoveAt(&b, checks...)
		if _, err := t.sendLast(ctx, &must); err != nil {
			if t.c.Classify(err) == ErrSwapLost {
				return errLost
			}
			return err
		}
		out = ord
		return nil
	})
	if errors.Is(err, errLost) {
		return nil, store.ErrUnfolded
	}
	if err != nil {
		return nil, fmt.Errorf("creating an order with its nonce: %w", err)
	}
	return out, nil
}

// orderDraft is what OrderCreate and OrderCreateSigned work out before
// their transactions.
type orderDraft struct {
	idents     string            // the identifiers as stored
	identsRead []acme.Identifier // and as scanOrder decodes them
	status     acme.Status
	reusing    bool                   // some authorization of o exists already
	fresh      []*store.Authorization // the new ones, in order
}

func draftOrder(o store.NewOrder) (orderDraft, error) {
	var d orderDraft
	var err error
	if d.idents, err = jsonText(o.Identifiers); err != nil {
		return d, err
	}
	if err := json.Unmarshal([]byte(d.idents), &d.identsRead); err != nil {
		return d, err
	}
	// RFC 8555 §7.1.6: an order whose authorizations are all valid is
	// ready at once. New authorizations carry their status; when one is
	// reused, OrderCreate asks the database.
	d.status = acme.StatusReady
	for _, a := range o.Authzs {
		if a.ID != "" {
			d.reusing, d.status = true, acme.StatusPending
			continue
		}
		d.fresh = append(d.fresh, a)
		if a.Status != acme.StatusValid {
			d.status = acme.StatusPending
		}
	}
	return d, nil
}

// queueOrder queues on b the order's rows: the order, its identifiers, its
// new authorizations and their challenges, and its links to all of its
// authorizations. It returns the order as it will read back; its times
// are filled in when b's first statement is read.
func (s *Store) queueOrder(b *batch, o store.NewOrder, d orderDraft) *store.Order {
	notBefore, notAfter, expires := dbTimeP(o.NotBefore), dbTimeP(o.NotAfter), dbTime(o.Expires)
	ord := &store.Order{ID: randomID(), AccountID: o.AccountID, Status: d.status, Identifiers: d.identsRead, Profile: o.Profile,
		NotBefore: notBefore, NotAfter: notAfter, Expires: expires, Replaces: o.Replaces}
	b.scan("creating order", []any{ts(&ord.CreatedAt), ts(&ord.UpdatedAt)},
		`INSERT INTO orders (id, account_id, status, identifiers, profile, not_before, not_after, expires_at, replaces, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, {now}, {now}) RETURNING created_at, updated_at`,
		ord.ID, o.AccountID, string(d.status), d.idents, o.Profile, s.d.TP(notBefore), s.d.TP(notAfter), s.d.T(expires), o.Replaces)
	identRows := make([][]any, len(o.Identifiers))
	for i, id := range o.Identifiers {
		identRows[i] = []any{ord.ID, string(id.Type), id.Value}
	}
	queueRows(b, "recording the identifiers of order "+ord.ID,
		`INSERT INTO order_identifiers (order_id, type, value)`, `($1, $2, $3)`, ` ON CONFLICT DO NOTHING`, identRows)
	freshIDs := s.queueAuthzs(b, o, d.fresh)
	if len(o.Authzs) > 0 {
		ord.AuthzIDs = make([]string, len(o.Authzs))
		links := make([][]any, len(o.Authzs))
		for i, a := range o.Authzs {
			id := a.ID
			if id == "" {
				id, freshIDs = freshIDs[0], freshIDs[1:]
			}
			ord.AuthzIDs[i] = id
			links[i] = []any{ord.ID, id, i}
		}
		queueRows(b, "linking the authorizations of order "+ord.ID,
			`INSERT INTO order_authz (order_id, authz_id, position)`, `($1, $2, $3)`, ``, links)
	}
	return ord
}

// checkReuse makes sure every authorization o reuses exists, is the
// account's own, and is valid and unexpired, in one read. On PostgreSQL the
// read takes a share lock on them (in id order) until the order commits: an
// AuthzDeactivate (or any other change to them) waits for the order, and
// then finds it among the authorization's orders and invalidates it; one
// that moved first is seen here, in the row's latest version, and the
// order is refused. AuthzsReusable, which chose them, ran before this
// transaction, so an authorization may have stopped being valid since.
// The refusal is store.ErrAuthzUnusable: the frontend drafts the order
// again, and finds fresh authorizations.
func checkReuse(ctx context.Context, t *txn, o store.NewOrder) error {
	var ids []any
	seen := map[string]bool{}
	for _, a := range o.Authzs {
		if a.ID != "" && !seen[a.ID] {
			seen[a.ID] = true
			ids = append(ids, a.ID)
		}
	}
	slices.SortFunc(ids, func(a, b any) int { return strings.Compare(a.(string), b.(string)) })
	type reused struct {
		owner, status string
		live          bool
	}
	found := map[string]reused{}
	for len(ids) > 0 {
		n := min(len(ids), maxRowsPerStatement)
		if err := collect(ctx, t, func(r Rows) error {
			var id string
			var a reused
			var live int64
			if err := r.Scan(&id, &a.owner, &a.status, &live); err != nil {
				return err
			}
			a.live = live == 1
			found[id] = a
			return nil
		}, `SELECT id, account_id, status, CASE WHEN expires_at > {now} THEN 1 ELSE 0 END FROM authorizations
WHERE id IN (`+paramList(n)+`) ORDER BY id {forshare}`, ids[:n]...); err != nil {
			return err
		}
		ids = ids[n:]
	}
	for _, a := range o.Authzs {
		if a.ID == "" {
			continue
		}
		r, ok := found[a.ID]
		if !ok {
			return fmt.Errorf("reusing authorization %s: %w", a.ID, store.ErrNotFound)
		}
		if r.owner != o.AccountID {
			return fmt.Errorf("reusing authorization %s of another account: %w", a.ID, store.ErrNotFound)
		}
		if r.status != string(acme.StatusValid) || !r.live {
			why := r.status
			if r.status == string(acme.StatusValid) {
				why = "expired"
			}
			return fmt.Errorf("reusing authorization %s: it is %s, not valid: %w", a.ID, why, store.ErrAuthzUnusable)
		}
	}
	return nil
}

// authzCreate writes one authorization and its challenges (newAuthz).
func (s *Store) authzCreate(ctx context.Context, t *txn, o store.NewOrder, a *store.Authorization) (string, error) {
	var b batch
	ids := s.queueAuthzs(&b, o, []*store.Authorization{a})
	if _, err := t.send(ctx, &b); err != nil {
		return "", err
	}
	return ids[0], nil
}

// queueAuthzs queues on b the new authorizations of o and all their
// challenges, one multi-row INSERT for each table, and returns their IDs in
// order.
func (s *Store) queueAuthzs(b *batch, o store.NewOrder, as []*store.Authorization) []string {
	if len(as) == 0 {
		return nil
	}
	ids := make([]string, len(as))
	authzRows := make([][]any, len(as))
	var challengeRows [][]any
	for i, a := range as {
		ids[i] = randomID()
		status := a.Status
		if status == "" {
			status = acme.StatusPending
		}
		expires := a.Expires
		if expires.IsZero() {
			expires = o.Expires
		}
		authzRows[i] = []any{ids[i], o.AccountID, string(a.Identifier.Type), a.Identifier.Value, a.Wildcard, string(status), s.d.T(expires)}
		for j, c := range a.Challenges {
			token := c.Token
			if token == "" {
				token = randomToken()
			}
			cs := c.Status
			if cs == "" {
				cs = acme.StatusPending
			}
			challengeRows = append(challengeRows, []any{randomID(), ids[i], j, string(c.Type), token, string(cs)})
		}
	}
	names := authzNames(as)
	queueRows(b, "creating authorizations for "+names,
		`INSERT INTO authorizations (id, account_id, identifier_type, identifier_value, wildcard, status, expires_at, created_at, updated_at)`,
		`($1, $2, $3, $4, $5, $6, $7, {now}, {now})`, ``, authzRows)
	queueRows(b, "creating challenges for "+names,
		`INSERT INTO challenges (id, authz_id, position, type, token, status, updated_at)`,
		`($1, $2, $3, $4, $5, $6, {now})`, ``, challengeRows)
	return ids
}

// authzNames lists the identifiers of authorizations for an error.
func authzNames(as []*store.Authorization) string {
	names := make([]string, len(as))
	for i, a := range as {
		names[i] = a.Identifier.String()
	}
	return strings.Join(names, ", ")
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

// --- moving ---

// ordersUsing locks (PostgreSQL) the orders that use authorization $1,
// found from it by id whatever the statistics ({inlist}), as the verdict's
// are.
const ordersUsing = `SELECT id FROM orders WHERE id {inlist}SELECT order_id FROM order_authz WHERE authz_id = $1{endlist} ORDER BY id {forupdate}`

// authzDeactivateOrdersSQL invalidates the unfinished orders using
// authorization $1; their status is no index's to answer (verdictReadySQL).
const authzDeactivateOrdersSQL = `UPDATE orders SET status = 'invalid', error = $2, updated_at = {now}
WHERE id {inlist}SELECT order_id FROM order_authz WHERE authz_id = $1{endlist} AND status || '' IN ('pending', 'ready', 'processing')`

func (s *Store) AuthzDeactivate(ctx context.Context, id string) (*store.Authorization, error) {
	var out *store.Authorization
	err := s.inTx(ctx, func(t *txn) error {
		if err := lockOrders(ctx, t, ordersUsing, id); err != nil {
			return err
		}
		n, err := t.exec(ctx, `UPDATE authorizations SET status = 'deactivated', updated_at = {now} WHERE id = $1 AND status IN ('pending', 'valid')`, id)
		if err != nil {
			return err
		}
		if n == 0 {
			a, err := s.authzByID(ctx, t, id)
			if err != nil {
				return err
			}
			return fmt.Errorf("deactivating authorization %s (status %s): %w", id, a.Status, store.ErrConflict)
		}
		pt, err := problemText(&acme.Problem{Type: acme.ProblemUnauthorized, Detail: "authorization " + id + " was deactivated"})
		if err != nil {
			return err
		}
		if _, err := t.exec(ctx, authzDeactivateOrdersSQL, id, pt); err != nil {
			return err
		}
		out, err = s.authzByID(ctx, t, id)
		return err
	})
	return out, err
}

// errLost ends a claim's transaction when its compare-and-swap moved
// nothing, rolling back the job queued with it.
var errLost = errors.New("the compare-and-swap moved nothing")

// claim runs a compare-and-swap (swap: one UPDATE ... RETURNING, scanning
// the row it moved) with job queued in the same transaction. River's
// insert is queued before the swap's result is known, so that both go in
// one round trip, with the COMMIT on PostgreSQL (sendClaim); won is false,
// and the job rolled back, when the swap moved nothing. moved runs on the
// row the swap returned, after the COMMIT where it went with the insert:
// it reads the row, and cannot refuse the claim. A condition of the claim
// belongs in the swap's WHERE.
func (s *Store) claim(ctx context.Context, swap *batch, job river.JobArgs, moved func() error) (won bool, err error) {
	var opts river.InsertOpts
	if o, ok := job.(river.JobArgsWithInsertOpts); ok {
		opts = o.InsertOpts()
	}
	err = s.inTx(ctx, func(t *txn) error {
		n, err := t.sendClaim(ctx, swap, opts.Queue, func() error { return s.enqueue(ctx, t, job) })
		if err != nil {
			return err
		}
		if slices.Contains(n, 0) { // n: the swap's statements' counts
			return errLost
		}
		return moved()
	})
	if errors.Is(err, errLost) {
		return false, nil
	}
	return err == nil, err
}

// The compare-and-swaps of the issuance path (challengeClaimSQL and the
// statements after it) name their row by its key and test its status as an
// expression no index answers (status || ''). The statuses they test have
// partial indexes (orders_processing_idx, orders_open_expires_idx,
// challenges_processing_idx, authorizations_pending_expires_idx), and with
// statistics taken before a backlog built up (autovacuum's threshold is a
// tenth of the table; with it off, statistics are as old as the last
// ANALYZE) PostgreSQL took such an index for nearly empty and chose it over
// the key: each swap read the whole backlog, 10,000 rows and 7–18 ms, so
// draining it took time quadratic in its size (TestBacklogPlans).

// challengeClaimSQL is ChallengeClaim's swap, less its RETURNING columns:
// $1 the challenge, whose authorization must still be pending and
// unexpired on the database clock.
const challengeClaimSQL = `UPDATE challenges SET status = 'processing', updated_at = {now}
WHERE id = $1 AND status || '' = 'pending'
  AND EXISTS (SELECT 1 FROM authorizations a WHERE a.id = challenges.authz_id AND a.status || '' = 'pending' AND a.expires_at > {now})
RETURNING `

func (s *Store) ChallengeClaim(ctx context.Context, challengeID string) (*store.Challenge, bool, error) {
	// The compare-and-swap: only one caller gets the row back. The
	// authorization must still be pending and unexpired on the database
	// clock.
	var c challengeRow
	var b batch
	b.scan("claiming challenge "+challengeID, c.dest(), challengeClaimSQL+challengeCols, challengeID)
	var out *store.Challenge
	won, err := s.claim(ctx, &b, jobs.ChallengeValidateArgs{ChallengeID: challengeID}, func() (err error) {
		out, err = c.finish()
		return err
	})
	switch {
	case err != nil:
		return nil, false, err
	case !won:
		// Another claim, a verdict or an expiry moved it first: report it
		// as it now stands.
		out, err = s.ChallengeByID(ctx, challengeID)
		if err != nil {
			return nil, false, fmt.Errorf("claiming challenge %s: %w", challengeID, err)
		}
	}
	return out, won, nil
}

// challengeClaimSignedSQL is ChallengeClaimSigned's swap, less its
// RETURNING columns: $1 the challenge, $2 the account. The authorization is
// the challenge's own, found by its key: its account and status are hidden
// from index choice (concatenated with an empty string), or PostgreSQL
// chose authorizations_account_status_idx and walked every pending
// authorization of the account for each challenge POST, thousands for a
// fleet's account (never analyzed; custom and generic plans;
// TestFleetPlans).
const challengeClaimSignedSQL = `UPDATE challenges SET status = 'processing', updated_at = {now}
WHERE id = $1 AND status || '' = 'pending'
  AND EXISTS (SELECT 1 FROM authorizations a WHERE a.id = challenges.authz_id AND a.account_id || '' = $2 AND a.status || '' = 'pending' AND a.expires_at > {now})
RETURNING `

func (s *Store) ChallengeClaimSigned(ctx context.Context, u store.SignedUse, challengeID string) (*store.Challenge, error) {
	// ChallengeClaim's swap, for an authorization of the account.
	var c challengeRow
	var out *store.Challenge
	err := s.claimSigned(ctx, u, challengeID, func(b *batch) {
		b.scan("claiming challenge "+challengeID, c.dest(), challengeClaimSignedSQL+challengeCols, challengeID, u.AccountID)
	}, jobs.ChallengeValidateArgs{ChallengeID: challengeID}, func() (err error) {
		out, err = c.finish()
		return err
	})
	return out, err
}

// Folds is false on SQLite, whose nonces are the frontend's (memNonces):
// there is no transaction of the store's to fold them into.
func (s *Store) Folds() bool { return s.mem == nil }

// claimSigned is claim for a folded write on the row id: u's checks
// (signedChecks), then the swap that swap adds, with job. It is
// ErrUnfolded when any of them moved nothing, when the store does not fold
// (Folds), and for text PostgreSQL cannot hold, which goes the ordinary
// way, where it fails only its own lookup.
func (s *Store) claimSigned(ctx context.Context, u store.SignedUse, id string, swap func(*batch), job river.JobArgs, moved func() error) error {
	if !s.Folds() || !store.Storable(u.AccountID) || !store.Storable(id) {
		return store.ErrUnfolded
	}
	b := signedChecks(u)
	swap(&b)
	won, err := s.claim(ctx, &b, job, moved)
	switch {
	case err != nil:
		return fmt.Errorf("claiming %s with its nonce: %w", id, err)
	case !won:
		return store.ErrUnfolded
	}
	return nil
}

// signedChecks is a folded write's batch up to its swap: two checks that
// must each hold, which sendClaim fails the transaction on when either
// finds nothing:
//  1. the nonce, consumed as NonceConsume does: of the current epoch and
//     not consumed before;
//  2. the account, still valid with the key the request verified with.
//
// The caller adds its swap, for a row of that account; the claim then
// sends the three, the job's insert and the COMMIT in one round trip.
func signedChecks(u store.SignedUse) batch {
	var one int
	var b batch
	b.scan("", []any{&one}, `INSERT INTO nonces_consumed (nonce, expires_at)
SELECT $1, $2 FROM nonce_epoch WHERE id = 1 AND epoch = $3
ON CONFLICT (nonce) DO NOTHING
RETURNING 1`, u.Nonce.Nonce, u.Nonce.Expires.UTC(), u.Nonce.Epoch)
	b.scan("", []any{&one}, `SELECT 1 FROM accounts WHERE id = $1 AND status = 'valid' AND key_jwk = $2`,
		u.AccountID, string(u.KeyJWK))
	return b
}

func (s *Store) ChallengeVerdict(ctx context.Context, v store.Verdict) error {
	if v.Status != acme.StatusValid && v.Status != acme.StatusInvalid {
		return fmt.Errorf("recording verdict on challenge %s: status %q is neither valid nor invalid", v.ChallengeID, v.Status)
	}
	err := s.inTx(ctx, func(t *txn) error {
		return s.verdict(ctx, t, v.ChallengeID, v.Status, v.Error, v.ValidationRecord)
	})
	if errors.Is(err, errLost) {
		// Read the challenge as it stands, outside the rolled-back
		// transaction: a verdict is terminal, and there may be no such
		// challenge at all.
		c, rerr := s.ChallengeByID(ctx, v.ChallengeID)
		if rerr != nil {
			return fmt.Errorf("recording verdict on challenge %s: %w", v.ChallengeID, rerr)
		}
		return fmt.Errorf("recording verdict on challenge %s: it is %s, not processing (a verdict is terminal): %w", v.ChallengeID, c.Status, store.ErrConflict)
	}
	return err
}

// verdict moves a processing challenge to valid or invalid, and its
// authorization and orders with it (RFC 8555 §7.1.6), or returns errLost
// when the challenge is not processing (or does not exist), and the
// transaction must roll back. It is the last thing its transaction does:
// on PostgreSQL it sends every statement and the COMMIT in one round trip
// (sendSwapLast), so callers run nothing on t after it.
func (s *Store) verdict(ctx context.Context, t *txn, challengeID string, status acme.Status, p *acme.Problem, record []byte) error {
	pt, err := problemText(p)
	if err != nil {
		return err
	}
	validated := "NULL"
	if status == acme.StatusValid {
		validated = "{now}"
	}
	// The statements find the authorization and its orders from the
	// challenge themselves, so that none needs another's result and all go
	// in one batch. In order:
	//   - lock (PostgreSQL) the orders using the challenge's authorization,
	//     in id order, before anything moves. A verdict on another
	//     authorization of the same order waits here; each statement after
	//     it takes a fresh snapshot (READ COMMITTED), so it sees that
	//     verdict's authorization when it decides whether the order is
	//     ready. Nothing else is locked while it waits;
	//   - the challenge's compare-and-swap: a lost swap stops the batch
	//     before anything else moves;
	//   - the authorization, only while pending: a second challenge's late
	//     verdict never undoes the first's;
	//   - for valid, the orders whose authorizations are now all valid; for
	//     invalid, the sibling challenges and the orders, only if the
	//     authorization is invalid (were it invalid already, this challenge
	//     would have been invalidated with it and lost its swap).
	// The orders are found from the challenge, never through their status:
	// {inlist} makes PostgreSQL look the challenge's few orders up by id
	// before it reads any order (an InitPlan, then orders_id_key), and
	// each order's status is tested as an expression no index answers
	// (status || ''), so it cannot start from orders_status_idx instead.
	// A semi-join on the orders left that choice to the planner: on
	// tables never analysed (a fresh database, autovacuum behind) it
	// walked every pending order through orders_status_idx to move one
	// (TestVerdictPlans: 20,000 read).
	var b batch
	b.exec("", verdictLockSQL, challengeID)
	var moved string
	swap := b.scan("", []any{&moved}, fmt.Sprintf(verdictSwapSQL, validated), challengeID, string(status), pt, string(record))
	b.exec("", verdictAuthzSQL, challengeID, string(status))
	if status == acme.StatusValid {
		b.exec("", verdictReadySQL, challengeID)
	} else {
		if p == nil {
			pt, _ = problemText(&acme.Problem{Type: acme.ProblemUnauthorized, Detail: "challenge " + challengeID + " failed"})
		}
		b.exec("", verdictSiblingsSQL, challengeID)
		b.exec("", verdictInvalidSQL, challengeID, pt)
	}
	_, won, err := t.sendSwapLast(ctx, &b, swap)
	if err != nil {
		return fmt.Errorf("recording verdict on challenge %s: %w", challengeID, err)
	}
	if !won {
		return errLost
	}
	return nil
}

// ordersOf selects the orders using challenge $1's authorization (verdict).
const ordersOf = `SELECT oa.order_id FROM order_authz oa JOIN challenges c ON c.authz_id = oa.authz_id WHERE c.id = $1`

// The verdict's statements on the challenge's authorization's orders
// (verdict): for valid, the pending orders whose authorizations are now
// all valid become ready; for invalid, the sibling challenges, and the
// pending orders, only if the authorization is invalid.
const (
	verdictLockSQL  = `SELECT id FROM orders WHERE id {inlist}` + ordersOf + `{endlist} ORDER BY id {forupdate}`
	verdictReadySQL = `UPDATE orders SET status = 'ready', updated_at = {now}
WHERE id {inlist}` + ordersOf + `{endlist} AND status || '' = 'pending'
  AND NOT EXISTS (SELECT 1 FROM order_authz oa JOIN authorizations a ON a.id = oa.authz_id
                  WHERE oa.order_id = orders.id AND a.status <> 'valid')`
	verdictInvalidAuthz = `EXISTS (SELECT 1 FROM authorizations a JOIN challenges c ON c.authz_id = a.id WHERE c.id = $1 AND a.status = 'invalid')`
	verdictSiblingsSQL  = `UPDATE challenges SET status = 'invalid', updated_at = {now}
WHERE authz_id = (SELECT authz_id FROM challenges WHERE id = $1) AND id <> $1 AND status IN ('pending', 'processing')
  AND ` + verdictInvalidAuthz
	verdictInvalidSQL = `UPDATE orders SET status = 'invalid', error = $2, updated_at = {now}
WHERE id {inlist}` + ordersOf + `{endlist} AND status || '' = 'pending' AND ` + verdictInvalidAuthz
)

// verdictSwapSQL is the verdict's swap of challenge $1 processing → $2,
// with its error $3 and record $4; %s is what validated_at becomes.
const verdictSwapSQL = `UPDATE challenges SET status = $2, error = $3, validation_record = $4, validated_at = %s, updated_at = {now}
WHERE id = $1 AND status || '' = 'processing' RETURNING id`

// verdictAuthzSQL moves challenge $1's authorization pending → $2.
const verdictAuthzSQL = `UPDATE authorizations SET status = $2, updated_at = {now}
WHERE id = (SELECT authz_id FROM challenges WHERE id = $1) AND status || '' = 'pending'`

// orderClaimSQL is OrderFinalizeBegin's swap of order $1 ready →
// processing with CSR $2 whose key's hash is $4, for profile $3, less its
// RETURNING columns. A blocked key (blocked_keys, by its primary key) moves
// nothing, in the claim's own statement: a finalize stays one round trip,
// and only a refused one reads why (KeyBlockedBy). A NULL $4 (no key
// known) is blocked by no row.
const orderClaimSQL = `UPDATE orders SET status = 'processing', csr = $2, csr_spki_sha256 = $4, updated_at = {now}
WHERE id = $1 AND status || '' = 'ready' AND profile = $3 AND expires_at > {now}
  AND NOT EXISTS (SELECT 1 FROM blocked_keys b WHERE b.spki_sha256 = $4)
RETURNING `

// orderClaimSignedSQL is orderClaimSQL for an order of account $5
// (OrderFinalizeSigned).
const orderClaimSignedSQL = `UPDATE orders SET status = 'processing', csr = $2, csr_spki_sha256 = $4, updated_at = {now}
WHERE id = $1 AND status || '' = 'ready' AND profile = $3 AND account_id = $5 AND expires_at > {now}
  AND NOT EXISTS (SELECT 1 FROM blocked_keys b WHERE b.spki_sha256 = $4)
RETURNING `

// orderFailSQL moves order $1 processing → invalid with problem $2.
const orderFailSQL = `UPDATE orders SET status = 'invalid', error = $2, updated_at = {now} WHERE id = $1 AND status || '' = 'processing'`

func (s *Store) OrderFinalizeBegin(ctx context.Context, orderID, profile string, csrDER, keyHash []byte) (*store.Order, bool, error) {
	// The compare-and-swap: only one caller gets the row back.
	var o orderRow
	var b batch
	// The job goes to the queue of profile, which the caller read: an
	// order of another profile is not claimed (its job would reach the
	// wrong workers).
	b.scan("claiming order "+orderID, o.dest(), orderClaimSQL+orderCols, orderID, nonNil(csrDER), profile, nullBytes(keyHash))
	var out *store.Order
	won, err := s.claim(ctx, &b, jobs.SignerIssueArgs{OrderID: orderID, Profile: profile}, func() (err error) {
		out, err = o.finish()
		return err
	})
	switch {
	case err != nil:
		return nil, false, err
	case !won:
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

func (s *Store) OrderFinalizeSigned(ctx context.Context, u store.SignedUse, orderID, profile string, csrDER, keyHash []byte) (*store.Order, error) {
	if !store.Storable(profile) {
		return nil, store.ErrUnfolded
	}
	// OrderFinalizeBegin's swap, for an order of the account.
	var o orderRow
	var out *store.Order
	err := s.claimSigned(ctx, u, orderID, func(b *batch) {
		b.scan("claiming order "+orderID, o.dest(), orderClaimSignedSQL+orderCols, orderID, nonNil(csrDER), profile, nullBytes(keyHash), u.AccountID)
	}, jobs.SignerIssueArgs{OrderID: orderID, Profile: profile}, func() (err error) {
		out, err = o.finish()
		return err
	})
	return out, err
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
	n, err := t.exec(ctx, orderFailSQL, orderID, pt)
	if err != nil {
		return err
	}
	if n == 0 {
		o, err := s.orderByID(ctx, t, orderID)
		if err != nil {
			return err
		}
		return fmt.Errorf("failing order %s: it is %s, not processing (a verdict is terminal): %w", orderID, o.Status, store.ErrConflict)
	}
	return nil
}
