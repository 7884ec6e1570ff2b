package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hallmark-ca/hallmark/store"
)

// Managed issuers (store.IssuerRecords, migration 0024): their records,
// their alternate chains, and which profiles sign with them.

func (s *Store) IssuerRecordPut(ctx context.Context, r store.IssuerRecord, der []byte, ev *store.AuditEvent) error {
	err := s.inTx(ctx, func(t *txn) error {
		var b batch
		b.exec("", `INSERT INTO settings (name, value) VALUES ($1, $2)
			ON CONFLICT (name) DO UPDATE SET value = excluded.value`, issuerSetting(r.ID), der)
		b.exec("", issuerRegisterSQL, r.ID)
		b.exec("", `INSERT INTO issuer_records (id, name, key_type, state, not_after, created_at, backend, key_label, key_id)
			VALUES ($1, $2, $3, 'active', $4, {now}, $5, $6, $7)
			ON CONFLICT (id) DO UPDATE SET name = excluded.name, key_type = excluded.key_type, not_after = excluded.not_after,
				backend = excluded.backend, key_label = excluded.key_label, key_id = excluded.key_id`,
			r.ID, r.Name, r.KeyType, s.d.T(r.NotAfter), r.Backend, r.KeyLabel, r.KeyID)
		b.exec("", `DELETE FROM issuer_chains WHERE issuer_id = $1`, r.ID)
		for i, c := range r.Chains {
			b.exec("", `INSERT INTO issuer_chains (issuer_id, idx, chain_pem) VALUES ($1, $2, $3)`, r.ID, i+1, c)
		}
		if _, err := t.send(ctx, &b); err != nil {
			return err
		}
		if ev != nil {
			return s.audit(ctx, t, *ev)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("recording issuer %s: %w", r.ID, err)
	}
	s.issuers.add(r.ID)
	return nil
}

// issuerRecordsSQL lists the records, newest first, with the profiles
// naming each; outstanding certificates are counted per issuer
// (issuerOutstandingSQL) through certificates_not_after_idx.
const issuerRecordsSQL = `SELECT r.id, r.name, r.key_type, r.state, r.not_after, r.created_at, r.backend, r.key_label, r.key_id,
  COALESCE((SELECT ` + "{agg}" + ` FROM profile_issuers p WHERE p.issuer_id = r.id), '')
FROM issuer_records r ORDER BY r.created_at DESC, r.id`

const issuerOutstandingSQL = `SELECT count(*) FROM certificates WHERE not_after > {now} AND issuer_id = $1`

func (s *Store) IssuerRecordsList(ctx context.Context) ([]store.IssuerRecord, error) {
	var out []store.IssuerRecord
	agg := "string_agg(p.profile, ',' ORDER BY p.profile)"
	if s.d.Name == "sqlite" {
		agg = "group_concat(p.profile, ',')"
	}
	err := s.autocommit(ctx, func(t *txn) error {
		out = nil
		err := collect(ctx, t, func(r Rows) error {
			var rec store.IssuerRecord
			var state, profiles string
			if err := r.Scan(&rec.ID, &rec.Name, &rec.KeyType, &state, ts(&rec.NotAfter), ts(&rec.CreatedAt), &rec.Backend, &rec.KeyLabel, &rec.KeyID, &profiles); err != nil {
				return err
			}
			rec.State = store.IssuerState(state)
			if profiles != "" {
				rec.Profiles = strings.Split(profiles, ",")
			}
			out = append(out, rec)
			return nil
		}, strings.Replace(issuerRecordsSQL, "{agg}", agg, 1))
		if err != nil {
			return err
		}
		for i := range out {
			if err := t.queryRow(ctx, issuerOutstandingSQL, out[i].ID).Scan(&out[i].Outstanding); err != nil {
				return err
			}
			if err := collect(ctx, t, func(r Rows) error {
				var c []byte
				err := r.Scan(&c)
				out[i].Chains = append(out[i].Chains, c)
				return err
			}, issuerChainsSQL, out[i].ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing issuers: %w", err)
	}
	return out, nil
}

func (s *Store) ProfileIssuers(ctx context.Context) (map[string][]store.ProfileIssuer, error) {
	out := map[string][]store.ProfileIssuer{}
	err := s.autocommit(ctx, func(t *txn) error {
		clear(out)
		return collect(ctx, t, func(r Rows) error {
			var profile string
			var pi store.ProfileIssuer
			if err := r.Scan(&profile, &pi.ID, &pi.KeyType, ts(&pi.CreatedAt), &pi.Backend); err != nil {
				return err
			}
			out[profile] = append(out[profile], pi)
			return nil
		}, `SELECT p.profile, r.id, r.key_type, r.created_at, r.backend FROM profile_issuers p
			JOIN issuer_records r ON r.id = p.issuer_id WHERE r.state = 'active'
			ORDER BY p.profile, r.created_at DESC, r.id`)
	})
	if err != nil {
		return nil, fmt.Errorf("reading the issuers of profiles: %w", err)
	}
	return out, nil
}

func (s *Store) ProfileIssuerDefault(ctx context.Context, profile, issuerID string) (bool, error) {
	var n int64
	err := s.inTx(ctx, func(t *txn) error {
		var err error
		n, err = t.exec(ctx, `INSERT INTO profile_issuers (profile, issuer_id)
			SELECT $1, $2 WHERE NOT EXISTS (SELECT 1 FROM profile_issuers WHERE profile = $1)
			ON CONFLICT DO NOTHING`, profile, issuerID)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("naming issuer %s for profile %s: %w", issuerID, profile, err)
	}
	return n > 0, nil
}

// retireUnusedSQL makes retiring every active issuer no profile names.
const retireUnusedSQL = `UPDATE issuer_records SET state = 'retiring'
WHERE state = 'active' AND id NOT IN (SELECT issuer_id FROM profile_issuers) AND id IN (%s)`

func (s *Store) IssuerRotate(ctx context.Context, profile string, to []string, ev store.AuditEvent) ([]string, error) {
	if len(to) == 0 {
		return nil, fmt.Errorf("rotating profile %s: name at least one issuer: %w", profile, store.ErrConflict)
	}
	var retiring []string
	err := s.inTx(ctx, func(t *txn) error {
		retiring = nil
		for _, id := range to {
			var state string
			err := t.queryRow(ctx, `SELECT state FROM issuer_records WHERE id = $1`, id).Scan(&state)
			if err != nil {
				return fmt.Errorf("issuer %s: %w", id, err)
			}
			if state != string(store.IssuerActive) {
				return fmt.Errorf("issuer %s is %s, only an active issuer signs: %w", id, state, store.ErrConflict)
			}
		}
		var old []string
		if err := collect(ctx, t, func(r Rows) error {
			var id string
			err := r.Scan(&id)
			old = append(old, id)
			return err
		}, `SELECT issuer_id FROM profile_issuers WHERE profile = $1`, profile); err != nil {
			return err
		}
		if _, err := t.exec(ctx, `DELETE FROM profile_issuers WHERE profile = $1`, profile); err != nil {
			return err
		}
		for _, id := range to {
			if _, err := t.exec(ctx, `INSERT INTO profile_issuers (profile, issuer_id) VALUES ($1, $2)`, profile, id); err != nil {
				return err
			}
		}
		if len(old) > 0 {
			args, marks := make([]any, len(old)), make([]string, len(old))
			for i, id := range old {
				args[i], marks[i] = id, fmt.Sprintf("$%d", i+1)
			}
			if err := collect(ctx, t, func(r Rows) error {
				var id string
				err := r.Scan(&id)
				retiring = append(retiring, id)
				return err
			}, fmt.Sprintf(retireUnusedSQL, strings.Join(marks, ", "))+` RETURNING id`, args...); err != nil {
				return err
			}
		}
		return s.audit(ctx, t, ev)
	})
	if err != nil {
		return nil, fmt.Errorf("rotating profile %s: %w", profile, err)
	}
	return retiring, nil
}

func (s *Store) IssuerRetire(ctx context.Context, id string, ev store.AuditEvent) (store.IssuerState, error) {
	var next store.IssuerState
	err := s.inTx(ctx, func(t *txn) error {
		var state string
		if err := t.queryRow(ctx, `SELECT state FROM issuer_records WHERE id = $1`, id).Scan(&state); err != nil {
			return err
		}
		switch store.IssuerState(state) {
		case store.IssuerActive:
			var named int
			if err := t.queryRow(ctx, `SELECT count(*) FROM profile_issuers WHERE issuer_id = $1`, id).Scan(&named); err != nil {
				return err
			}
			if named > 0 {
				return fmt.Errorf("%d profiles still sign with it; rotate them to another issuer first: %w", named, store.ErrConflict)
			}
			next = store.IssuerRetiring
		case store.IssuerRetiring:
			var live int
			if err := t.queryRow(ctx, issuerOutstandingSQL, id).Scan(&live); err != nil {
				return err
			}
			if live > 0 {
				return fmt.Errorf("%d of its certificates have not expired; it keeps signing CRLs until they have: %w", live, store.ErrConflict)
			}
			next = store.IssuerRetired
		default:
			return fmt.Errorf("it is retired already: %w", store.ErrConflict)
		}
		if _, err := t.exec(ctx, `UPDATE issuer_records SET state = $2 WHERE id = $1`, id, string(next)); err != nil {
			return err
		}
		ev.Detail = strings.TrimSpace(ev.Detail + " " + state + " -> " + string(next))
		return s.audit(ctx, t, ev)
	})
	if err != nil {
		return "", fmt.Errorf("retiring issuer %s: %w", id, err)
	}
	return next, nil
}

const issuerChainsSQL = `SELECT chain_pem FROM issuer_chains WHERE issuer_id = $1 ORDER BY idx`

func (s *Store) IssuerChains(ctx context.Context, id string) ([][]byte, error) {
	var out [][]byte
	err := s.autocommit(ctx, func(t *txn) error {
		out = nil
		return collect(ctx, t, func(r Rows) error {
			var c []byte
			err := r.Scan(&c)
			out = append(out, c)
			return err
		}, issuerChainsSQL, id)
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("reading the chains of issuer %s: %w", id, err)
	}
	return out, nil
}
