package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hallmark-ca/hallmark/store"
)

const eabCols = `seq, id, mac_key, label, allowed_domains, allowed_ip_ranges, prevalidated, COALESCE(account_id, ''), created_at, bound_at`

func scanEAB(r interface{ Scan(...any) error }, seq *int64) (*store.EABKey, error) {
	var k store.EABKey
	var domains, ips string
	var dummy int64
	if seq == nil {
		seq = &dummy
	}
	if err := r.Scan(seq, &k.ID, &k.MACKey, &k.Label, &domains, &ips, &k.PreValidated, &k.AccountID, ts(&k.CreatedAt), tsNull(&k.BoundAt)); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(domains), &k.AllowedDomains); err != nil {
		return nil, fmt.Errorf("decoding allowed domains of key %s: %w", k.ID, err)
	}
	if err := json.Unmarshal([]byte(ips), &k.AllowedIPRanges); err != nil {
		return nil, fmt.Errorf("decoding allowed IP ranges of key %s: %w", k.ID, err)
	}
	return &k, nil
}

func (s *Store) EABCreate(ctx context.Context, k store.EABKey, ev store.AuditEvent) (*store.EABKey, error) {
	if k.ID == "" || len(k.MACKey) == 0 {
		return nil, errors.New("creating an EAB key: it needs an id and a MAC key")
	}
	domains, ips := k.AllowedDomains, k.AllowedIPRanges
	if domains == nil {
		domains = []string{}
	}
	if ips == nil {
		ips = []string{}
	}
	dt, err := jsonText(domains)
	if err != nil {
		return nil, err
	}
	it, err := jsonText(ips)
	if err != nil {
		return nil, err
	}
	var out *store.EABKey
	err = s.inTx(ctx, func(t *txn) error {
		if _, err := t.exec(ctx, `INSERT INTO eab_keys (id, mac_key, label, allowed_domains, allowed_ip_ranges, prevalidated, created_at)
VALUES ($1, $2, $3, $4, $5, $6, {now})`, k.ID, k.MACKey, k.Label, dt, it, k.PreValidated); err != nil {
			return fmt.Errorf("creating EAB key %s: %w", k.ID, err)
		}
		var err error
		if out, err = scanEAB(t.queryRow(ctx, `SELECT `+eabCols+` FROM eab_keys WHERE id = $1`, k.ID), nil); err != nil {
			return err
		}
		return s.audit(ctx, t, ev)
	})
	return out, err
}

// eabNotUnused says why a statement on the unused EAB key id (doing it:
// binding, deleting) changed nothing: there is no such key (ErrNotFound),
// or it already bound an account (ErrConflict, naming it).
func eabNotUnused(ctx context.Context, t *txn, id, doing string) error {
	var owner string
	if err := t.queryRow(ctx, `SELECT COALESCE(account_id, '') FROM eab_keys WHERE id = $1`, id).Scan(&owner); err != nil {
		return fmt.Errorf("%s EAB key %s: %w", doing, id, err)
	}
	return fmt.Errorf("EAB key %s already bound account %s: %w", id, owner, store.ErrConflict)
}

func (s *Store) EABDelete(ctx context.Context, id string, ev store.AuditEvent) error {
	return s.inTx(ctx, func(t *txn) error {
		n, err := t.exec(ctx, `DELETE FROM eab_keys WHERE id = $1 AND account_id IS NULL`, id)
		if err != nil {
			return fmt.Errorf("deleting EAB key %s: %w", id, err)
		}
		if n == 0 {
			return eabNotUnused(ctx, t, id, "deleting")
		}
		return s.audit(ctx, t, ev)
	})
}

func (s *Store) EABByID(ctx context.Context, id string) (*store.EABKey, error) {
	out, err := autocommitted(ctx, s, func(t *txn) (*store.EABKey, error) {
		return scanEAB(t.queryRow(ctx, `SELECT `+eabCols+` FROM eab_keys WHERE id = $1`, id), nil)
	})
	if err != nil {
		return nil, fmt.Errorf("reading EAB key %s: %w", id, err)
	}
	return out, nil
}

func (s *Store) EABList(ctx context.Context, p store.Page) ([]*store.EABKey, string, error) {
	out, next, err := listPage(ctx, s, p, func(r Rows, seq *int64) (*store.EABKey, error) { return scanEAB(r, seq) }, nil,
		`SELECT `+eabCols+` FROM eab_keys WHERE seq < $1 ORDER BY seq DESC LIMIT $2`)
	if err != nil {
		return nil, "", fmt.Errorf("listing EAB keys: %w", err)
	}
	return out, next, nil
}

func (s *Store) AccountCreateBound(ctx context.Context, a *store.Account, keyID string) (*store.Account, error) {
	return s.accountCreate(ctx, a, func(t *txn, id string) error { return s.bindEAB(ctx, t, keyID, id) })
}

// bindEAB binds the unused EAB key keyID to the new account id.
func (s *Store) bindEAB(ctx context.Context, t *txn, keyID, id string) error {
	// RFC 8555 §7.3.4 leaves reuse to the server; a key that binds more
	// than once is a shared secret no operator can revoke cleanly.
	n, err := t.exec(ctx, `UPDATE eab_keys SET account_id = $2, bound_at = {now} WHERE id = $1 AND account_id IS NULL`, keyID, id)
	if err != nil {
		return fmt.Errorf("binding EAB key %s: %w", keyID, err)
	}
	if n == 0 {
		return eabNotUnused(ctx, t, keyID, "binding")
	}
	return nil
}

func (s *Store) AccountEAB(ctx context.Context, accountID string) (*store.EABKey, error) {
	out, err := autocommitted(ctx, s, func(t *txn) (*store.EABKey, error) {
		return scanEAB(t.queryRow(ctx, `SELECT `+eabCols+` FROM eab_keys WHERE account_id = $1`, accountID), nil)
	})
	if err != nil {
		return nil, fmt.Errorf("reading the EAB key of account %s: %w", accountID, err)
	}
	return out, nil
}

func (s *Store) AuthzCreate(ctx context.Context, a *store.Authorization, limits store.OrderLimits) (*store.Authorization, error) {
	var out *store.Authorization
	err := s.inTx(ctx, func(t *txn) error {
		// Only pending authorizations per account bounds a newAuthz
		// (reserve.go); an authorization born valid takes no unit.
		o := store.NewOrder{AccountID: a.AccountID, Expires: a.Expires, Limits: store.OrderLimits{PendingAuthzs: limits.PendingAuthzs}}
		if err := s.reserveOrder(ctx, t, o, orderDraft{fresh: []*store.Authorization{a}}); err != nil {
			return err
		}
		id, err := s.authzCreate(ctx, t, o, a)
		if err != nil {
			return err
		}
		out, err = s.authzByID(ctx, t, id)
		return err
	})
	return out, err
}
