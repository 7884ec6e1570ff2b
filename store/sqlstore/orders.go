package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// --- reading ---

const orderCols = `seq, id, account_id, status, identifiers, profile, not_before, not_after, expires_at, csr, cert_serial, error, replaces, created_at, updated_at`

func scanOrder(r interface{ Scan(...any) error }, seq *int64) (*store.Order, error) {
	var o store.Order
	var status, idents, problem string
	if err := r.Scan(seq, &o.ID, &o.AccountID, &status, &idents, &o.Profile, tsNull(&o.NotBefore), tsNull(&o.NotAfter),
		ts(&o.Expires), &o.CSR, &o.CertSerial, &problem, &o.Replaces, ts(&o.CreatedAt), ts(&o.UpdatedAt)); err != nil {
		return nil, err
	}
	o.Status = acme.Status(status)
	if len(o.CSR) == 0 {
		o.CSR = nil
	}
	if err := json.Unmarshal([]byte(idents), &o.Identifiers); err != nil {
		return nil, fmt.Errorf("decoding identifiers of order %s: %w", o.ID, err)
	}
	var err error
	o.Error, err = parseProblem(problem)
	return &o, err
}

// fillAuthzIDs reads the authorization IDs of orders, in their order.
func fillAuthzIDs(ctx context.Context, t *txn, orders ...*store.Order) error {
	for _, o := range orders {
		o.AuthzIDs = nil
		err := collect(ctx, t, func(r Rows) error {
			var id string
			if err := r.Scan(&id); err != nil {
				return err
			}
			o.AuthzIDs = append(o.AuthzIDs, id)
			return nil
		}, `SELECT authz_id FROM order_authz WHERE order_id = $1 ORDER BY position`, o.ID)
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) orderByID(ctx context.Context, t *txn, id string) (*store.Order, error) {
	var seq int64
	o, err := scanOrder(t.queryRow(ctx, `SELECT `+orderCols+` FROM orders WHERE id = $1`, id), &seq)
	if err != nil {
		return nil, fmt.Errorf("reading order %s: %w", id, err)
	}
	return o, fillAuthzIDs(ctx, t, o)
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

func (s *Store) OrdersList(ctx context.Context, f store.OrderFilter, p store.Page) ([]*store.Order, string, error) {
	fill := func(t *txn, os []*store.Order) error { return fillAuthzIDs(ctx, t, os...) }
	out, next, err := listPage(ctx, s, p, func(r Rows, seq *int64) (*store.Order, error) { return scanOrder(r, seq) }, fill,
		`SELECT `+orderCols+` FROM orders
WHERE ($1 = '' OR account_id = $1)
  AND ($2 = '' OR EXISTS (SELECT 1 FROM order_identifiers oi WHERE oi.order_id = orders.id AND oi.value = $2))
  AND ($3 = '' OR status = $3)
  AND seq < $4
ORDER BY seq DESC LIMIT $5`, f.AccountID, f.Identifier, string(f.Status))
	if err != nil {
		return nil, "", fmt.Errorf("listing orders: %w", err)
	}
	return out, next, nil
}

const authzCols = `id, account_id, identifier_type, identifier_value, wildcard, status, expires_at, created_at`

func (s *Store) authzByID(ctx context.Context, t *txn, id string) (*store.Authorization, error) {
	var a store.Authorization
	var typ, status string
	err := t.queryRow(ctx, `SELECT `+authzCols+` FROM authorizations WHERE id = $1`, id).
		Scan(&a.ID, &a.AccountID, &typ, &a.Identifier.Value, &a.Wildcard, &status, ts(&a.Expires), ts(&a.CreatedAt))
	if err != nil {
		return nil, fmt.Errorf("reading authorization %s: %w", id, err)
	}
	a.Identifier.Type = acme.IdentifierType(typ)
	a.Status = acme.Status(status)
	err = collect(ctx, t, func(r Rows) error {
		c, err := scanChallenge(r)
		if err != nil {
			return err
		}
		a.Challenges = append(a.Challenges, *c)
		return nil
	}, `SELECT `+challengeCols+` FROM challenges WHERE authz_id = $1 ORDER BY position`, id)
	return &a, err
}

func (s *Store) AuthzByID(ctx context.Context, id string) (*store.Authorization, error) {
	var out *store.Authorization
	err := s.autocommit(ctx, func(t *txn) (err error) {
		out, err = s.authzByID(ctx, t, id)
		return err
	})
	return out, err
}

func (s *Store) AuthzReusable(ctx context.Context, accountID string, id acme.Identifier, wildcard bool, minExpiry time.Time) (*store.Authorization, error) {
	var out *store.Authorization
	err := s.inTx(ctx, func(t *txn) error {
		var aid string
		err := t.queryRow(ctx, `SELECT id FROM authorizations
WHERE account_id = $1 AND identifier_type = $2 AND identifier_value = $3 AND wildcard = $4
  AND status = 'valid' AND expires_at > $5 AND expires_at > {now}
ORDER BY expires_at DESC LIMIT 1`, accountID, string(id.Type), id.Value, wildcard, s.d.T(minExpiry)).Scan(&aid)
		if err != nil {
			return fmt.Errorf("finding a reusable authorization for %s: %w", id, err)
		}
		out, err = s.authzByID(ctx, t, aid)
		return err
	})
	return out, err
}

const challengeCols = `id, authz_id, type, token, status, validated_at, error, validation_record`

func scanChallenge(r interface{ Scan(...any) error }) (*store.Challenge, error) {
	var c store.Challenge
	var typ, status, problem, record string
	if err := r.Scan(&c.ID, &c.AuthzID, &typ, &c.Token, &status, tsNull(&c.Validated), &problem, &record); err != nil {
		return nil, err
	}
	c.Type = acme.ChallengeType(typ)
	c.Status = acme.Status(status)
	if record != "" {
		c.ValidationRecord = json.RawMessage(record)
	}
	var err error
	c.Error, err = parseProblem(problem)
	return &c, err
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

func (s *Store) OrderCreate(ctx context.Context, o store.NewOrder) (*store.Order, error) {
	idents, err := jsonText(o.Identifiers)
	if err != nil {
		return nil, err
	}
	var out *store.Order
	err = s.inTx(ctx, func(t *txn) error {
		orderID := randomID()
		if _, err := t.exec(ctx, `INSERT INTO orders (id, account_id, status, identifiers, profile, not_before, not_after, expires_at, replaces, created_at, updated_at)
VALUES ($1, $2, 'pending', $3, $4, $5, $6, $7, $8, {now}, {now})`,
			orderID, o.AccountID, idents, o.Profile, s.d.TP(o.NotBefore), s.d.TP(o.NotAfter), s.d.T(o.Expires), o.Replaces); err != nil {
			return fmt.Errorf("creating order: %w", err)
		}
		for _, id := range o.Identifiers {
			if _, err := t.exec(ctx, `INSERT INTO order_identifiers (order_id, type, value) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
				orderID, string(id.Type), id.Value); err != nil {
				return err
			}
		}
		for i, a := range o.Authzs {
			authzID := a.ID
			if authzID != "" {
				var owner string
				if err := t.queryRow(ctx, `SELECT account_id FROM authorizations WHERE id = $1`, authzID).Scan(&owner); err != nil {
					return fmt.Errorf("reusing authorization %s: %w", authzID, err)
				}
				if owner != o.AccountID {
					return fmt.Errorf("reusing authorization %s of another account: %w", authzID, store.ErrNotFound)
				}
			} else {
				var err error
				if authzID, err = s.authzCreate(ctx, t, o, a); err != nil {
					return err
				}
			}
			if _, err := t.exec(ctx, `INSERT INTO order_authz (order_id, authz_id, position) VALUES ($1, $2, $3)`, orderID, authzID, i); err != nil {
				return fmt.Errorf("linking authorization %s: %w", authzID, err)
			}
		}
		// RFC 8555 §7.1.6: an order whose authorizations are all valid is
		// ready at once (they were reused).
		if _, err := t.exec(ctx, `UPDATE orders SET status = 'ready' WHERE id = $1 AND NOT EXISTS (
  SELECT 1 FROM order_authz oa JOIN authorizations a ON a.id = oa.authz_id
  WHERE oa.order_id = orders.id AND a.status <> 'valid')`, orderID); err != nil {
			return err
		}
		if o.ReplacesSerial != "" { // RFC 9773 §5; store/sqlstore/ari.go
			if err := s.replace(ctx, t, o.ReplacesSerial, o.AccountID, orderID); err != nil {
				return err
			}
		}
		var err error
		out, err = s.orderByID(ctx, t, orderID)
		return err
	})
	return out, err
}

func (s *Store) authzCreate(ctx context.Context, t *txn, o store.NewOrder, a *store.Authorization) (string, error) {
	id := randomID()
	status := a.Status
	if status == "" {
		status = acme.StatusPending
	}
	expires := a.Expires
	if expires.IsZero() {
		expires = o.Expires
	}
	if _, err := t.exec(ctx, `INSERT INTO authorizations (id, account_id, identifier_type, identifier_value, wildcard, status, expires_at, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, {now}, {now})`,
		id, o.AccountID, string(a.Identifier.Type), a.Identifier.Value, a.Wildcard, string(status), s.d.T(expires)); err != nil {
		return "", fmt.Errorf("creating authorization for %s: %w", a.Identifier, err)
	}
	for j, c := range a.Challenges {
		token := c.Token
		if token == "" {
			token = randomToken()
		}
		cs := c.Status
		if cs == "" {
			cs = acme.StatusPending
		}
		if _, err := t.exec(ctx, `INSERT INTO challenges (id, authz_id, position, type, token, status, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, {now})`, randomID(), id, j, string(c.Type), token, string(cs)); err != nil {
			return "", fmt.Errorf("creating %s challenge for %s: %w", c.Type, a.Identifier, err)
		}
	}
	return id, nil
}

// --- moving ---

// ordersUsing locks (PostgreSQL) the orders that use an authorization.
const ordersUsing = `SELECT id FROM orders WHERE id IN (SELECT order_id FROM order_authz WHERE authz_id = $1) ORDER BY id {forupdate}`

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
		if _, err := t.exec(ctx, `UPDATE orders SET status = 'invalid', error = $2, updated_at = {now}
WHERE status IN ('pending', 'ready') AND id IN (SELECT order_id FROM order_authz WHERE authz_id = $1)`, id, pt); err != nil {
			return err
		}
		out, err = s.authzByID(ctx, t, id)
		return err
	})
	return out, err
}

func (s *Store) ChallengeClaim(ctx context.Context, challengeID string) (*store.Challenge, bool, error) {
	var out *store.Challenge
	var claimed bool
	err := s.inTx(ctx, func(t *txn) error {
		// The compare-and-swap: only one caller sees n == 1. The
		// authorization must still be pending and unexpired on the
		// database clock.
		n, err := t.exec(ctx, `UPDATE challenges SET status = 'processing', updated_at = {now}
WHERE id = $1 AND status = 'pending'
  AND EXISTS (SELECT 1 FROM authorizations a WHERE a.id = challenges.authz_id AND a.status = 'pending' AND a.expires_at > {now})`, challengeID)
		if err != nil {
			return fmt.Errorf("claiming challenge %s: %w", challengeID, err)
		}
		claimed = n == 1
		if claimed {
			if err := s.enqueue(ctx, t, jobs.ChallengeValidateArgs{ChallengeID: challengeID}); err != nil {
				return err
			}
		}
		out, err = s.challengeByID(ctx, t, challengeID)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return out, claimed, nil
}

func (s *Store) ChallengeVerdict(ctx context.Context, v store.Verdict, done jobs.Done) error {
	if v.Status != acme.StatusValid && v.Status != acme.StatusInvalid {
		return fmt.Errorf("recording verdict on challenge %s: status %q is neither valid nor invalid", v.ChallengeID, v.Status)
	}
	return s.inTx(ctx, func(t *txn) error {
		if err := s.verdict(ctx, t, v.ChallengeID, v.Status, v.Error, v.ValidationRecord); err != nil {
			return err
		}
		return complete(ctx, t, done)
	})
}

func complete(ctx context.Context, t *txn, done jobs.Done) error {
	if done == nil {
		return nil
	}
	if err := done(ctx, t.raw.Raw()); err != nil {
		return fmt.Errorf("completing the job: %w", err)
	}
	return nil
}

// verdict moves a processing challenge to valid or invalid, and its
// authorization and orders with it (RFC 8555 §7.1.6).
func (s *Store) verdict(ctx context.Context, t *txn, challengeID string, status acme.Status, p *acme.Problem, record []byte) error {
	var authzID string
	if err := t.queryRow(ctx, `SELECT authz_id FROM challenges WHERE id = $1`, challengeID).Scan(&authzID); err != nil {
		return fmt.Errorf("recording verdict on challenge %s: %w", challengeID, err)
	}
	if err := lockOrders(ctx, t, ordersUsing, authzID); err != nil {
		return err
	}
	pt, err := problemText(p)
	if err != nil {
		return err
	}
	validated := "NULL"
	if status == acme.StatusValid {
		validated = "{now}"
	}
	n, err := t.exec(ctx, `UPDATE challenges SET status = $2, error = $3, validation_record = $4, validated_at = `+validated+`, updated_at = {now}
WHERE id = $1 AND status = 'processing'`, challengeID, string(status), pt, string(record))
	if err != nil {
		return err
	}
	if n == 0 {
		var cur string
		_ = t.queryRow(ctx, `SELECT status FROM challenges WHERE id = $1`, challengeID).Scan(&cur)
		return fmt.Errorf("recording verdict on challenge %s: it is %s, not processing (a verdict is terminal): %w", challengeID, cur, store.ErrConflict)
	}
	// The authorization moves only while pending: a second challenge's
	// late verdict never undoes the first's.
	n, err = t.exec(ctx, `UPDATE authorizations SET status = $2, updated_at = {now} WHERE id = $1 AND status = 'pending'`, authzID, string(status))
	if err != nil || n == 0 {
		return err
	}
	if status == acme.StatusValid {
		_, err = t.exec(ctx, `UPDATE orders SET status = 'ready', updated_at = {now}
WHERE status = 'pending' AND id IN (SELECT order_id FROM order_authz WHERE authz_id = $1)
  AND NOT EXISTS (SELECT 1 FROM order_authz oa JOIN authorizations a ON a.id = oa.authz_id
                  WHERE oa.order_id = orders.id AND a.status <> 'valid')`, authzID)
		return err
	}
	if _, err := t.exec(ctx, `UPDATE challenges SET status = 'invalid', updated_at = {now}
WHERE authz_id = $1 AND id <> $2 AND status IN ('pending', 'processing')`, authzID, challengeID); err != nil {
		return err
	}
	if p == nil {
		pt, _ = problemText(&acme.Problem{Type: acme.ProblemUnauthorized, Detail: "challenge " + challengeID + " failed"})
	}
	_, err = t.exec(ctx, `UPDATE orders SET status = 'invalid', error = $2, updated_at = {now}
WHERE status = 'pending' AND id IN (SELECT order_id FROM order_authz WHERE authz_id = $1)`, authzID, pt)
	return err
}

func (s *Store) OrderFinalizeBegin(ctx context.Context, orderID string, csrDER []byte) (*store.Order, bool, error) {
	var out *store.Order
	var claimed bool
	err := s.inTx(ctx, func(t *txn) error {
		n, err := t.exec(ctx, `UPDATE orders SET status = 'processing', csr = $2, updated_at = {now}
WHERE id = $1 AND status = 'ready' AND expires_at > {now}`, orderID, nonNil(csrDER))
		if err != nil {
			return fmt.Errorf("claiming order %s: %w", orderID, err)
		}
		claimed = n == 1
		out, err = s.orderByID(ctx, t, orderID)
		if err != nil {
			return err
		}
		if claimed {
			return s.enqueue(ctx, t, jobs.SignerIssueArgs{OrderID: orderID, Profile: out.Profile})
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return out, claimed, nil
}

func (s *Store) OrderIssued(ctx context.Context, in store.Issued, done jobs.Done) error {
	return s.inTx(ctx, func(t *txn) error {
		o, err := s.orderByID(ctx, t, in.OrderID)
		if err != nil {
			return err
		}
		n, err := t.exec(ctx, `UPDATE orders SET status = 'valid', cert_serial = $2, updated_at = {now} WHERE id = $1 AND status = 'processing'`,
			in.OrderID, in.Certificate.Serial)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("storing the certificate of order %s: it is %s, not processing: %w", in.OrderID, o.Status, store.ErrConflict)
		}
		c := in.Certificate
		c.OrderID = in.OrderID
		if c.AccountID == "" {
			c.AccountID = o.AccountID
		}
		if c.Profile == "" {
			c.Profile = o.Profile
		}
		if err := s.certificateInsert(ctx, t, c); err != nil {
			return err
		}
		return complete(ctx, t, done)
	})
}

func (s *Store) OrderFail(ctx context.Context, orderID string, p acme.Problem, done jobs.Done) error {
	return s.inTx(ctx, func(t *txn) error {
		if err := s.orderFail(ctx, t, orderID, p); err != nil {
			return err
		}
		return complete(ctx, t, done)
	})
}

func (s *Store) orderFail(ctx context.Context, t *txn, orderID string, p acme.Problem) error {
	pt, err := problemText(&p)
	if err != nil {
		return err
	}
	n, err := t.exec(ctx, `UPDATE orders SET status = 'invalid', error = $2, updated_at = {now} WHERE id = $1 AND status = 'processing'`, orderID, pt)
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
