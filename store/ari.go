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

// UpstreamWindow is what a relay backend's upstream CA says of the renewal
// of a certificate it issued (its own renewalInfo, RFC 9773 §4.2), as the
// worker last fetched it. It is kept apart from the operator's
// RenewalWindow: the worker's refresh must never overwrite an operator's
// move, nor an operator's move the upstream's. renewalInfo serves the one
// that ends first (protocol/ari.go).
type UpstreamWindow struct {
	Serial string
	// Start and End are zero when the upstream knows nothing of the
	// certificate (it answered 404 or a document that did not parse).
	Start, End time.Time
	// ExplanationURL is the upstream's, served as it is; may be empty.
	ExplanationURL string
	CheckedAt      time.Time
	// NextCheckAt is when the worker may ask the upstream again: the
	// upstream's Retry-After from CheckedAt.
	NextCheckAt time.Time
}

// Known reports whether the upstream gave a window.
func (u *UpstreamWindow) Known() bool { return !u.End.IsZero() }

// UpstreamDue is a relay certificate whose upstream window is due to be
// fetched: never fetched, or past its NextCheckAt.
type UpstreamDue struct {
	Serial string
	DER    []byte
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

	// UpstreamDue lists up to limit live (unexpired, unrevoked)
	// certificates of issuerID (a relay backend's) whose upstream window
	// is due: never fetched first, then the longest overdue.
	UpstreamDue(ctx context.Context, issuerID string, limit int) ([]UpstreamDue, error)
	// UpstreamRecord keeps what the upstream said of a certificate,
	// replacing what it said before.
	UpstreamRecord(ctx context.Context, w UpstreamWindow) error
	// UpstreamWindowBySerial is the upstream's window of a certificate;
	// ErrNotFound when none was fetched or the upstream knows none.
	UpstreamWindowBySerial(ctx context.Context, serial string) (*UpstreamWindow, error)
}
