package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// ErrBadIdentifier is LiftPause refusing an identifier it cannot read.
var ErrBadIdentifier = errors.New("write dns:<name>, ip:<address> or a bare DNS name")

// PauseLifter is what lifting a pause needs of the store.
type PauseLifter interface {
	PauseLift(ctx context.Context, accountID string, ident *acme.Identifier, ev store.AuditEvent) (int64, error)
}

// LiftPause deletes an account's runs of failed validations (only ident's
// when it is set: "dns:example.com" or a bare DNS name), so it may order
// again, recording the audit event in the same transaction. Nothing to
// lift is ErrNothingToDo.
func LiftPause(ctx context.Context, st PauseLifter, accountID, ident, actor string) (int64, error) {
	var id *acme.Identifier
	what := "every identifier"
	if ident != "" {
		typ, value, ok := strings.Cut(ident, ":")
		if !ok {
			typ, value = string(acme.IdentifierDNS), ident
		}
		if typ != string(acme.IdentifierDNS) && typ != string(acme.IdentifierIP) || value == "" {
			return 0, fmt.Errorf("identifier %q: %w", ident, ErrBadIdentifier)
		}
		id = &acme.Identifier{Type: acme.IdentifierType(typ), Value: value}
		what = id.String()
	}
	n, err := st.PauseLift(ctx, accountID, id, store.AuditEvent{Actor: actor, Action: store.ActionPauseLifted,
		Detail: "pause lifted by an operator for " + what})
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, fmt.Errorf("account %s has no failing validations recorded for %s: %w", accountID, what, ErrNothingToDo)
	}
	return n, nil
}

// PauseLine is a pause as `hallmark pauses list --json` and the API's
// pauses list it.
type PauseLine struct {
	Account     string    `json:"account"`
	Identifier  string    `json:"identifier"`
	Failures    int64     `json:"failures"`
	FirstFailed time.Time `json:"first_failed_at"`
	LastFailed  time.Time `json:"last_failed_at"`
	Paused      bool      `json:"paused"`
}

// PauseLineOf is p as a PauseLine.
func PauseLineOf(p store.Pause) PauseLine {
	return PauseLine{Account: p.AccountID, Identifier: p.Identifier.String(), Failures: p.Failures,
		FirstFailed: p.FirstFailed.UTC(), LastFailed: p.LastFailed.UTC(), Paused: p.Paused}
}
