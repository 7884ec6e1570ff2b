package store

import (
	"context"
	"time"
)

// RenewalWindow is a renewal window an operator moved (RFC 9773 §4.2): the
// certificate's suggestedWindow from now on, with the reason the
// explanationURL page shows.
type RenewalWindow struct {
	Serial  string
	Start   time.Time
	End     time.Time
	Reason  string
	Actor   string
	MovedAt time.Time
}

// RenewalSelector chooses the certificates whose windows an operator moves.
// At least one field must be set; set fields must all match. Only
// certificates that have not expired and are not revoked are moved.
type RenewalSelector struct {
	Serial    string
	IssuerID  string
	Profile   string
	AccountID string
}

// Empty reports a selector that names nothing (and would match everything).
func (s RenewalSelector) Empty() bool {
	return s.Serial == "" && s.IssuerID == "" && s.Profile == "" && s.AccountID == ""
}

// Renewals is what ARI (RFC 9773) needs of the store. The CLI and the admin
// panel call RenewalMove; the frontend reads windows. Replacement (RFC 9773
// §5) is marked by OrderCreate when NewOrder.ReplacesSerial is set.
type Renewals interface {
	// RenewalMove sets the window of every selected certificate to
	// [start, end] with reason, replacing an earlier move, and records one
	// audit event (ev, with the count in its Detail) in the same
	// transaction when it moved any. It returns the serials moved. An
	// empty selector is refused.
	RenewalMove(ctx context.Context, sel RenewalSelector, start, end time.Time, reason string, ev AuditEvent) ([]string, error)
	// RenewalWindowBySerial is the moved window of a certificate;
	// ErrNotFound when no operator moved it.
	RenewalWindowBySerial(ctx context.Context, serial string) (*RenewalWindow, error)
}
