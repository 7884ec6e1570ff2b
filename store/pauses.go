package store

import (
	"context"
	"errors"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// ErrPaused is OrderCreate refusing an order naming an identifier its
// account is paused for (NewOrder.Pause): nothing is written. Pauses says
// which and since when.
var ErrPaused = errors.New("store: the account is paused for an identifier of the order")

// ActionPauseLifted is the audit action of an unpause: by the subscriber
// (actor "acme:<account id>", through the frontend's unpause page) or an
// operator (the CLI, the panel).
const ActionPauseLifted = "account.unpaused"

// PauseRule is when an account is paused for an identifier: its
// validations of it have failed MinFailures times or more, with no valid
// one between, the first at least After ago on the database clock. The
// zero rule pauses nobody.
type PauseRule struct {
	After       time.Duration
	MinFailures int64
}

// On reports whether the rule pauses anyone.
func (r PauseRule) On() bool { return r.After > 0 && r.MinFailures > 0 }

// Pause is an account's unbroken run of failed validations of one
// identifier (a wildcard's counts for its base name). Paused says whether
// the rule it was read with pauses it.
type Pause struct {
	AccountID   string
	Identifier  acme.Identifier
	Failures    int64
	FirstFailed time.Time
	LastFailed  time.Time
	Paused      bool
}

// PauseFilter narrows Pauses.
type PauseFilter struct {
	AccountID string // one account; "" for all
	// All keeps the runs the rule does not pause (yet) too.
	All bool
}

// Pauses are the failing runs of validations (migration 0021): written by
// the verdict's own transaction (ChallengeVerdict: a failure added on
// invalid, the run deleted on valid), read by newOrder's (OrderCreate:
// ErrPaused, or ErrNotClaimed for a claim) and listed and lifted here.
type Pauses interface {
	// PausesList lists runs by f under rule, oldest first, one page at a
	// time.
	PausesList(ctx context.Context, rule PauseRule, f PauseFilter, p Page) ([]Pause, string, error)
	// PauseLift deletes the account's runs (only ident's when it is set),
	// paused or not, recording ev in the same transaction when any was
	// deleted (its Subject is the account), and says how many.
	PauseLift(ctx context.Context, accountID string, ident *acme.Identifier, ev AuditEvent) (int64, error)
}
