package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/store"
)

// ActionARIMove is the audit action of an operator moving renewal windows.
const ActionARIMove = "ari.move"

// ErrNoReason is MoveRenewal refusing a move without a reason.
var ErrNoReason = errors.New("say why the renewal windows move: subscribers read it on the explanation page")

// RenewalMover is what moving renewal windows needs of the store.
type RenewalMover interface {
	Now(ctx context.Context) (time.Time, error)
	RenewalMove(ctx context.Context, sel store.RenewalSelector, start, end time.Time, reason string, ev store.AuditEvent) ([]string, error)
}

// MoveRenewal moves the renewal windows of the live certificates sel names
// into the past on the database clock, so ARI clients (RFC 9773 §4.2)
// renew at once; reason is shown on the explanation page. The audit event
// is written in the move's transaction. A selection that names no live
// certificate is ErrNothingToDo and records nothing.
func MoveRenewal(ctx context.Context, st RenewalMover, sel store.RenewalSelector, reason, actor string) ([]string, error) {
	if sel.Empty() {
		return nil, errors.New("name the certificates to move by serial, issuer, profile or account")
	}
	reason = strings.TrimSpace(reason)
	if reason == "" || !store.Storable(reason) {
		return nil, ErrNoReason
	}
	now, err := st.Now(ctx)
	if err != nil {
		return nil, err
	}
	moved, err := st.RenewalMove(ctx, sel, now.Add(-time.Hour), now.Add(-time.Second), reason,
		store.AuditEvent{Actor: actor, Action: ActionARIMove, Subject: selSubject(sel), Detail: reason})
	if err != nil {
		return nil, err
	}
	if len(moved) == 0 {
		return nil, fmt.Errorf("no live (unexpired, unrevoked) certificate matches %s: %w", selSubject(sel), ErrNothingToDo)
	}
	return moved, nil
}

// selSubject names a selection for the audit log: the serial alone when
// that is all it names.
func selSubject(sel store.RenewalSelector) string {
	if sel == (store.RenewalSelector{Serial: sel.Serial}) {
		return sel.Serial
	}
	var parts []string
	for _, kv := range [][2]string{{"serial", sel.Serial}, {"issuer", sel.IssuerID}, {"profile", sel.Profile}, {"account", sel.AccountID}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	return strings.Join(parts, " ")
}
