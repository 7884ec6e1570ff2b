package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// The audit log's chains (store.AuditChain): the database appends each
// inserted row (migration 0023's trigger); these read them back, prune the
// trail's oldest rows without breaking its chain, and run operators'
// actions with their audit event in one transaction.

func (s *Store) AuditHeads(ctx context.Context) (ops, trail store.AuditHead, err error) {
	err = s.autocommit(ctx, func(t *txn) error {
		return collect(ctx, t, func(r Rows) error {
			var h store.AuditHead
			if err := r.Scan(&h.Trail, &h.Seq, &h.Hash, &h.BaseSeq, &h.BaseHash); err != nil {
				return err
			}
			if h.Trail {
				trail = h
			} else {
				ops = h
			}
			return nil
		}, `SELECT trail, seq, hash, base_seq, base_hash FROM audit_chain`)
	})
	if err != nil {
		return ops, trail, fmt.Errorf("reading the audit chains' heads: %w", err)
	}
	trail.Trail = true
	return ops, trail, nil
}

func (s *Store) AuditChainRows(ctx context.Context, trail bool, after, upTo int64, limit int) ([]store.AuditEvent, error) {
	out, err := s.auditRows(ctx, `SELECT `+auditCols+` FROM audit_events
WHERE trail = $1 AND seq > $2 AND seq <= $3 ORDER BY seq LIMIT $4`, trail, after, upTo, limit)
	if err != nil {
		return nil, fmt.Errorf("reading the audit chain after %d: %w", after, err)
	}
	return out, nil
}

func (s *Store) AuditAfter(ctx context.Context, after int64, limit int) ([]store.AuditEvent, error) {
	out, err := s.auditRows(ctx, `SELECT `+auditCols+` FROM audit_events WHERE id > $1 ORDER BY id LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("reading audit events after %d: %w", after, err)
	}
	return out, nil
}

func (s *Store) auditRows(ctx context.Context, q string, args ...any) ([]store.AuditEvent, error) {
	return autocommitted(ctx, s, func(t *txn) ([]store.AuditEvent, error) {
		var out []store.AuditEvent
		err := collect(ctx, t, func(r Rows) error {
			var id int64
			ev, err := scanAudit(r, &id)
			out = append(out, ev)
			return err
		}, q, args...)
		return out, err
	})
}

func (s *Store) AuditLastPrune(ctx context.Context) (store.AuditEvent, bool, error) {
	evs, err := s.auditRows(ctx, `SELECT `+auditCols+` FROM audit_events WHERE action = $1 AND NOT trail ORDER BY seq DESC LIMIT 1`, store.ActionAuditPrune)
	if err != nil || len(evs) == 0 {
		return store.AuditEvent{}, false, err
	}
	return evs[0], true, nil
}

func (s *Store) AuditUnchained(ctx context.Context) (int64, error) {
	n, err := autocommitted(ctx, s, func(t *txn) (n int64, err error) {
		err = t.queryRow(ctx, `SELECT count(*) FROM audit_events WHERE seq IS NULL`).Scan(&n)
		return n, err
	})
	if err != nil {
		return 0, fmt.Errorf("counting unchained audit events: %w", err)
	}
	return n, nil
}

// AuditPrune deletes the trail's events before before: first those from
// before the chain (by age), then the chain's oldest rows, a prefix in
// chain order that stops at the first row not old enough, moving the
// chain's base to the last row deleted, so what is kept still verifies.
func (s *Store) AuditPrune(ctx context.Context, before time.Time, limit int) (int64, error) {
	var n int64
	err := s.inTx(ctx, func(t *txn) (err error) {
		if n, err = t.exec(ctx, `DELETE FROM audit_events WHERE id IN (
  SELECT id FROM audit_events WHERE at < $1 AND trail AND seq IS NULL ORDER BY at LIMIT $2)`, s.d.T(before), limit); err != nil || n >= int64(limit) {
			return err
		}
		var lastSeq int64
		var lastHash string
		err = collect(ctx, t, func(r Rows) error {
			var seq int64
			var hash string
			var at time.Time
			if err := r.Scan(&seq, &hash, ts(&at)); err != nil {
				return err
			}
			if at.Before(before) && (lastSeq == 0 || seq == lastSeq+1) {
				lastSeq, lastHash = seq, hash
			} else {
				return errStopRows
			}
			return nil
		}, `SELECT seq, hash, at FROM audit_events WHERE trail AND seq IS NOT NULL ORDER BY seq LIMIT $1`, int64(limit)-n)
		if err != nil && !errors.Is(err, errStopRows) {
			return err
		}
		if lastSeq == 0 {
			return nil
		}
		if _, err := t.exec(ctx, `UPDATE audit_chain SET base_seq = $1, base_hash = $2 WHERE trail`, lastSeq, lastHash); err != nil {
			return err
		}
		m, err := t.exec(ctx, `DELETE FROM audit_events WHERE trail AND seq <= $1`, lastSeq)
		n += m
		if err != nil {
			return err
		}
		return s.audit(ctx, t, store.AuditEvent{Actor: "housekeeping", Action: store.ActionAuditPrune, Subject: "trail",
			Detail: store.PruneDetail(lastSeq, lastHash)})
	})
	if err != nil {
		return 0, fmt.Errorf("deleting trail events before %s: %w", before.UTC().Format(time.RFC3339), err)
	}
	return n, nil
}

// errStopRows ends a scan early; collect passes it back.
var errStopRows = errors.New("enough rows read")

func (s *Store) AccountDeactivateAudited(ctx context.Context, id string, ev store.AuditEvent) (*store.Account, error) {
	return s.accountDeactivate(ctx, id, &ev)
}

// jobTx is a transaction as store.JobTx.
type jobTx struct {
	s *Store
	t *txn
}

func (j jobTx) Jobs() jobs.Tx { return j.t.raw.Raw() }

func (j jobTx) Abandon(ctx context.Context, sub jobs.Subject, p acme.Problem) (bool, error) {
	return j.s.abandon(ctx, j.t, sub, p)
}

// JobAudited runs do and records its event in one transaction. A verdict
// that lands between an abandon's read and its swap rolls everything back;
// the second run reads the verdict and abandons nothing.
func (s *Store) JobAudited(ctx context.Context, do func(ctx context.Context, tx store.JobTx) (store.AuditEvent, error)) error {
	for attempt := 0; ; attempt++ {
		err := s.inTx(ctx, func(t *txn) error {
			t.open = true
			ev, err := do(ctx, jobTx{s, t})
			if err != nil {
				return err
			}
			return s.audit(ctx, t, ev)
		})
		if attempt == 0 && (errors.Is(err, errLost) || errors.Is(err, store.ErrConflict)) {
			continue
		}
		return err
	}
}
