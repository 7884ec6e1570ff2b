package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// OrderCreate writes the order, its identifiers, its new authorizations and
// their challenges and the links between them with one multi-row INSERT
// per table, and returns the order as built here: what it wrote is what
// orderByID would read back, apart from the database clock's times, which
// come back from the INSERT.
//
// With a nonce in u or a Clock in o (an order drafted without a read),
// checks go in front of the order's rows, each failing the transaction
// when it finds nothing: u's (signedChecks); the database's clock within
// store.ClockSlack of o.Clock; no authorization of the account for o's
// identifiers that the caller would have reused (reusableSQL, for
// o.Expires); and, when o.Pause is on, that the account is paused for
// none of o's identifiers (pauseCheck: ErrPaused when nothing else is
// checked, or else ErrNotClaimed, and the ordinary path says why).
// Everything and the COMMIT then go in one round trip. With o.Limits set
// the units are reserved first, under the account's lock (reserve.go).
func (s *Store) OrderCreate(ctx context.Context, u store.SignedUse, o store.NewOrder) (*store.Order, error) {
	d, err := draftOrder(o)
	if err != nil {
		return nil, err
	}
	b, release, ok := s.signedChecks(u)
	blind := !o.Clock.IsZero()
	if !ok || (u.Nonce.Nonce != "" && o.AccountID != u.AccountID) || (blind && !d.blind(o)) {
		release()
		return nil, store.ErrNotClaimed
	}
	if blind {
		var one int
		b.scan("", []any{&one}, `SELECT 1 WHERE {now} BETWEEN $1 AND $2`,
			s.d.T(o.Clock.Add(-store.ClockSlack)), s.d.T(o.Clock.Add(store.ClockSlack)))
		reused, args := s.reusableSQL(o.AccountID, authzKeysOf(o), o.Methods, o.Expires)
		b.scan("", []any{&one}, `SELECT 1 WHERE NOT EXISTS (`+reused+`)`, args...)
	}
	checks := make([]int, len(b.stmts))
	for i := range checks {
		checks[i] = i
	}
	var out *store.Order
	err = s.inTx(ctx, func(t *txn) error {
		// The rate limits' units are taken first, under the account's
		// lock (reserve.go): one round trip, only when a limit is set
		// and nothing is claimed (a claim checks them in its batch).
		if len(checks) == 0 {
			if err := s.reserveOrder(ctx, t, o, d); err != nil {
				return err
			}
		}
		// Reused authorizations are checked next: that is the one read,
		// and every write after it needs no result of another, so they go
		// in one batch (on PostgreSQL one round trip, with BEGIN when
		// nothing is reused).
		if d.reusing {
			if err := checkReuse(ctx, t, o); err != nil {
				return err
			}
		}
		b := b // a retried transaction sends the batch again from here
		var one int
		pause := pauseCheck(&b, o, &one) // pauses.go
		claim := checks
		if len(checks) > 0 {
			// A claim takes its rate limits' units in its one round trip.
			claim = append(slices.Clip(checks), reserveChecks(&b, o, d)...)
		}
		ord := s.queueOrder(&b, o, d)
		ready := -1
		if d.reusing {
			ready = b.exec("", `UPDATE orders SET status = 'ready' WHERE id = $1 AND NOT EXISTS (
  SELECT 1 FROM order_authz oa JOIN authorizations a ON a.id = oa.authz_id
  WHERE oa.order_id = orders.id AND a.status <> 'valid')`, ord.ID)
		}
		n, err := s.sendOrder(ctx, t, &b, o, claim, pause)
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
	if err != nil {
		release() // nothing committed
	}
	if errors.Is(err, errLost) {
		return nil, store.ErrNotClaimed
	}
	return out, err
}

// sendOrder sends an order's batch: with checks, as sendSwapLast does
// (errLost when one finds nothing), the pause check among them; else with
// the pause check alone (sendChecked: ErrPaused). On PostgreSQL the order
// commits in this round trip unless a replacement has statements still to run.
func (s *Store) sendOrder(ctx context.Context, t *txn, b *batch, o store.NewOrder, checks []int, pause int) ([]int64, error) {
	if len(checks) > 0 {
		if pause >= 0 {
			checks = append(slices.Clip(checks), pause)
		}
		n, won, err := t.sendSwapLast(ctx, b, checks...)
		if err == nil && !won {
			return n, errLost
		}
		return n, err
	}
	send := t.sendLast
	if o.ReplacesSerial != "" {
		send = t.send // s.replace still has statements to run
	}
	return t.sendChecked(ctx, b, pause, send)
}

// authzKeysOf are the identifiers o's authorizations are for.
func authzKeysOf(o store.NewOrder) []store.AuthzKey {
	keys := make([]store.AuthzKey, len(o.Authzs))
	for i, a := range o.Authzs {
		keys[i] = store.AuthzKey{Identifier: a.Identifier, Wildcard: a.Wildcard, Corroborated: o.Corroborated}
	}
	return keys
}

// orderDraft is what OrderCreate works out before its transaction.
type orderDraft struct {
	idents     string            // the identifiers as stored
	identsRead []acme.Identifier // and as scanOrder decodes them
	status     acme.Status
	reusing    bool                   // some authorization of o exists already
	fresh      []*store.Authorization // the new ones, in order
}

// blind reports whether o can be written as drafted without a read: its
// authorizations all new, as many as one reusable read asks about, and no
// certificate replaced.
func (d orderDraft) blind(o store.NewOrder) bool {
	return !d.reusing && o.ReplacesSerial == "" && len(o.Authzs) > 0 && len(o.Authzs) <= reusableChunk
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
