package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hallmark-ca/hallmark/jobs/notify"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

const accountCols = `seq, id, key_jwk, thumbprint, contact, status, terms_agreed, created_at`

func scanAccount(r interface{ Scan(...any) error }, seq *int64) (*store.Account, error) {
	var a store.Account
	var jwk, contact, status string
	var dummy int64
	if seq == nil {
		seq = &dummy
	}
	if err := r.Scan(seq, &a.ID, &jwk, &a.Thumbprint, &contact, &status, &a.TermsAgreed, ts(&a.CreatedAt)); err != nil {
		return nil, err
	}
	return accountFromColumns(a, jwk, contact, status)
}

// errUndecodable marks a stored row that was read but does not decode:
// the row's trouble, which a batch shared with other requests keeps to the
// request that read it.
var errUndecodable = errors.New("the stored row does not decode")

// accountFromColumns completes an account scanned into a with its text
// columns decoded.
func accountFromColumns(a store.Account, jwk, contact, status string) (*store.Account, error) {
	a.KeyJWK = json.RawMessage(jwk)
	a.Status = acme.Status(status)
	if err := json.Unmarshal([]byte(contact), &a.Contact); err != nil {
		return nil, fmt.Errorf("decoding contacts of account %s: %w (%v)", a.ID, errUndecodable, err)
	}
	return &a, nil
}

func (s *Store) accountByID(ctx context.Context, t *txn, id string) (*store.Account, error) {
	a, err := scanAccount(t.queryRow(ctx, `SELECT `+accountCols+` FROM accounts WHERE id = $1`, id), nil)
	if err != nil {
		return nil, fmt.Errorf("reading account %s: %w", id, err)
	}
	return a, nil
}

func (s *Store) AccountCreate(ctx context.Context, a *store.Account) (*store.Account, error) {
	return s.accountCreate(ctx, a, nil)
}

// accountCreate inserts a and, when bind is set, runs it with the new id in
// the same transaction (AccountCreateBound binds an EAB key). A thumbprint
// that already has an account is ErrConflict with that account; a bind
// failure that is itself a conflict returns no account.
func (s *Store) accountCreate(ctx context.Context, a *store.Account, bind func(t *txn, id string) error) (*store.Account, error) {
	status := a.Status
	if status == "" {
		status = acme.StatusValid
	}
	contact := a.Contact
	if contact == nil {
		contact = []string{}
	}
	ct, err := jsonText(contact)
	if err != nil {
		return nil, err
	}
	var out *store.Account
	var bindErr error
	err = s.inTx(ctx, func(t *txn) error {
		bindErr = nil
		id := randomID()
		if _, err := t.exec(ctx, `INSERT INTO accounts (id, key_jwk, thumbprint, contact, status, terms_agreed, created_at)
VALUES ($1, $2, $3, $4, $5, $6, {now})`, id, string(a.KeyJWK), a.Thumbprint, ct, string(status), a.TermsAgreed); err != nil {
			return fmt.Errorf("creating account: %w", err)
		}
		if bind != nil {
			if bindErr = bind(t, id); bindErr != nil {
				return bindErr
			}
		}
		out, err = s.accountByID(ctx, t, id)
		return err
	})
	if errors.Is(err, store.ErrConflict) && bindErr == nil {
		// The transaction is gone (PostgreSQL aborts it on the violation),
		// so the existing account is read in a new one.
		if existing, e2 := s.AccountByThumbprint(ctx, a.Thumbprint); e2 == nil {
			return existing, err
		}
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Store) AccountByID(ctx context.Context, id string) (*store.Account, error) {
	return autocommitted(ctx, s, func(t *txn) (*store.Account, error) { return s.accountByID(ctx, t, id) })
}

func (s *Store) AccountByThumbprint(ctx context.Context, thumbprint string) (*store.Account, error) {
	var out *store.Account
	err := s.inTx(ctx, func(t *txn) (err error) {
		out, err = scanAccount(t.queryRow(ctx, `SELECT `+accountCols+` FROM accounts WHERE thumbprint = $1`, thumbprint), nil)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading account by thumbprint: %w", err)
	}
	return out, nil
}

func (s *Store) AccountUpdate(ctx context.Context, id string, contact []string) (*store.Account, error) {
	if contact == nil {
		contact = []string{}
	}
	ct, err := jsonText(contact)
	if err != nil {
		return nil, err
	}
	var out *store.Account
	err = s.inTx(ctx, func(t *txn) error {
		n, err := t.exec(ctx, `UPDATE accounts SET contact = $2 WHERE id = $1`, id, ct)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("updating account %s: %w", id, store.ErrNotFound)
		}
		out, err = s.accountByID(ctx, t, id)
		return err
	})
	return out, err
}

// problemAccountDeactivated is what orders cancelled with their account say.
var problemAccountDeactivated = acme.Problem{Type: acme.ProblemUnauthorized, Detail: "the account was deactivated"}

func (s *Store) AccountDeactivate(ctx context.Context, id string) (*store.Account, error) {
	return s.accountDeactivate(ctx, id, nil)
}

// accountDeactivate deactivates the account and, when it did and ev is
// set, records ev in the same transaction.
func (s *Store) accountDeactivate(ctx context.Context, id string, ev *store.AuditEvent) (*store.Account, error) {
	var out *store.Account
	err := s.inTx(ctx, func(t *txn) error {
		// Orders first: every operation that moves orders and
		// authorizations locks in that order, so none deadlocks another.
		if err := lockOrders(ctx, t, `SELECT id FROM orders WHERE account_id = $1 AND status IN ('pending', 'ready', 'processing') ORDER BY id {forupdate}`, id); err != nil {
			return err
		}
		n, err := t.exec(ctx, `UPDATE accounts SET status = 'deactivated' WHERE id = $1 AND status = 'valid'`, id)
		if err != nil {
			return err
		}
		if n == 1 {
			// RFC 8555 §7.3.6: the account's authorizations stop
			// authorizing, and the server SHOULD cancel its pending
			// operations: every unfinished order, one being signed
			// included (the worker then stores nothing; a deactivation
			// for a compromised key must not wait out a signer that is
			// down).
			if _, err := t.exec(ctx, `UPDATE authorizations SET status = 'deactivated', updated_at = {now}
WHERE account_id = $1 AND status IN ('pending', 'valid')`, id); err != nil {
				return err
			}
			pt, err := problemText(&problemAccountDeactivated)
			if err != nil {
				return err
			}
			if _, err := t.exec(ctx, `UPDATE orders SET status = 'invalid', error = $2, updated_at = {now}
WHERE account_id = $1 AND status IN ('pending', 'ready', 'processing')`, id, pt); err != nil {
				return err
			}
			if err := s.notify(ctx, t, eventNotice(notify.AccountDeactivated, store.AuditEvent{Subject: id})); err != nil {
				return err
			}
			if ev != nil {
				if err := s.audit(ctx, t, *ev); err != nil {
					return err
				}
			}
		}
		out, err = s.accountByID(ctx, t, id)
		return err
	})
	return out, err
}

func (s *Store) AccountKeyChange(ctx context.Context, id, oldThumb string, newJWK []byte, newThumb string) (*store.Account, error) {
	var out *store.Account
	err := s.inTx(ctx, func(t *txn) error {
		n, err := t.exec(ctx, `UPDATE accounts SET key_jwk = $3, thumbprint = $4 WHERE id = $1 AND thumbprint = $2`,
			id, oldThumb, string(newJWK), newThumb)
		if err != nil {
			return fmt.Errorf("changing the key of account %s: %w", id, err)
		}
		if n == 0 {
			if _, err := s.accountByID(ctx, t, id); err != nil {
				return err
			}
			return fmt.Errorf("changing the key of account %s: the current key is no longer %s: %w", id, oldThumb, store.ErrConflict)
		}
		if _, err := t.exec(ctx, priorKeySQL, id, oldThumb); err != nil {
			return fmt.Errorf("keeping the replaced key of account %s: %w", id, err)
		}
		out, err = s.accountByID(ctx, t, id)
		return err
	})
	return out, err
}

// priorKeySQL keeps the thumbprint of account $1's replaced key $2.
const priorKeySQL = `INSERT INTO account_prior_keys (account_id, thumbprint, replaced_at) VALUES ($1, $2, {now})
ON CONFLICT (account_id, thumbprint) DO UPDATE SET replaced_at = excluded.replaced_at`

// AccountPriorThumbprints are the thumbprints of the keys account id has
// replaced, the most recently replaced first (two replaced within the
// clock's resolution in either order).
func (s *Store) AccountPriorThumbprints(ctx context.Context, id string) ([]string, error) {
	out, err := autocommitted(ctx, s, func(t *txn) ([]string, error) {
		var thumbs []string
		err := collect(ctx, t, func(r Rows) error {
			var th string
			if err := r.Scan(&th); err != nil {
				return err
			}
			thumbs = append(thumbs, th)
			return nil
		}, `SELECT thumbprint FROM account_prior_keys WHERE account_id = $1 ORDER BY replaced_at DESC, thumbprint`, id)
		return thumbs, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the replaced keys of account %s: %w", id, err)
	}
	return out, nil
}

func (s *Store) AccountsList(ctx context.Context, p store.Page) ([]*store.Account, string, error) {
	out, next, err := listPage(ctx, s, p, func(r Rows, seq *int64) (*store.Account, error) { return scanAccount(r, seq) }, nil,
		`SELECT `+accountCols+` FROM accounts WHERE seq < $1 ORDER BY seq DESC LIMIT $2`)
	if err != nil {
		return nil, "", fmt.Errorf("listing accounts: %w", err)
	}
	return out, next, nil
}

// lockOrders takes row locks (PostgreSQL) on the orders a query selects, in
// id order.
func lockOrders(ctx context.Context, t *txn, q string, args ...any) error {
	return collect(ctx, t, func(r Rows) error {
		var id string
		return r.Scan(&id)
	}, q, args...)
}
