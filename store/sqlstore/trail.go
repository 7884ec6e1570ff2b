package sqlstore

import (
	"context"
	"fmt"

	"github.com/hallmark-ca/hallmark/jobs/notify"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// auditCols are an audit event's columns, as scanAudit reads them.
const auditCols = `id, actor, action, subject, detail, at, trail, request_id, client_addr, ptr_name, user_agent, seq, prev_hash, hash`

func scanAudit(r Rows, seq *int64) (store.AuditEvent, error) {
	var ev store.AuditEvent
	o := &ev.Origin
	var chainSeq *int64
	var prev, hash *string
	err := r.Scan(&ev.ID, &ev.Actor, &ev.Action, &ev.Subject, &ev.Detail, ts(&ev.At), &ev.Trail,
		&o.RequestID, &o.ClientAddr, &o.PTR, &o.UserAgent, &chainSeq, &prev, &hash)
	if chainSeq != nil && prev != nil && hash != nil {
		ev.Seq, ev.PrevHash, ev.Hash = *chainSeq, *prev, *hash
	}
	*seq = ev.ID
	return ev, err
}

// auditFindSQL is AuditFind's statement for f, newest first by id.
func auditFindSQL(d *Dialect, f store.AuditFilter) (string, []any) {
	var w where
	if f.Action != "" {
		w.and(`action = $?`, f.Action)
	}
	if f.Trail != nil {
		if *f.Trail {
			w.and(`trail`)
		} else {
			w.and(`NOT trail`)
		}
	}
	if !f.Since.IsZero() {
		w.and(`at >= $?`, d.T(f.Since))
	}
	if f.RequestID != "" {
		w.and(`request_id = $?`, f.RequestID)
	}
	return `SELECT ` + auditCols + ` FROM audit_events
` + w.page("id"), w.args
}

func (s *Store) AuditFind(ctx context.Context, f store.AuditFilter, p store.Page) ([]store.AuditEvent, string, error) {
	if !store.Storable(f.Action) || !store.Storable(f.RequestID) {
		return []store.AuditEvent{}, "", nil // no row can hold it
	}
	q, args := auditFindSQL(s.d, f)
	out, next, err := listPage(ctx, s, p, scanAudit, nil, q, args...)
	if err != nil {
		return nil, "", fmt.Errorf("listing audit events: %w", err)
	}
	return out, next, nil
}

func (s *Store) AccountCreateTrailed(ctx context.Context, a *store.Account, keyID string, ev store.AuditEvent) (*store.Account, error) {
	record := func(t *txn, id string) error {
		e := ev
		e.Subject = id
		if e.Actor == "" {
			e.Actor = "acme:" + id
		}
		if err := s.audit(ctx, t, e); err != nil {
			return err
		}
		n := eventNotice(notify.AccountCreated, e)
		n.Account = id
		return s.notify(ctx, t, n)
	}
	if keyID == "" {
		return s.accountCreate(ctx, a, record)
	}
	return s.accountCreate(ctx, a, func(t *txn, id string) error {
		if err := s.bindEAB(ctx, t, keyID, id); err != nil {
			return err
		}
		return record(t, id)
	})
}

func (s *Store) OrderFailTrailed(ctx context.Context, orderID string, p acme.Problem, ev store.AuditEvent) error {
	return s.inTx(ctx, func(t *txn) error {
		if err := s.orderFail(ctx, t, orderID, p); err != nil {
			return err
		}
		return s.audit(ctx, t, ev)
	})
}
