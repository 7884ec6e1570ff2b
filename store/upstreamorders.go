package store

import (
	"context"
	"time"
)

// UpstreamOrder is the order a relay backend placed at its upstream ACME CA
// for a Hallmark order (migration 0011): the journal that lets any worker's
// retry resume it rather than place a second one, which would be a second
// upstream certificate, live and unrecorded, and a second count against a
// public CA's rate limits.
type UpstreamOrder struct {
	OrderID string // the Hallmark order
	Backend string // the relay backend's name ([backends.<name>])
	// AccountURL is the upstream account (its key ID, RFC 8555 §7.3)
	// that placed the order: only that account can read or finalize it.
	AccountURL string
	// OrderURL is the upstream order (RFC 8555 §7.1.3).
	OrderURL string
	PlacedAt time.Time // the database's clock; set by the store
}

// UpstreamOrders is the journal of relay backends' upstream orders, one
// per Hallmark order and backend. The relay writes it between placing the
// upstream order and finalizing it, so nothing issued upstream goes
// unrecorded.
type UpstreamOrders interface {
	// UpstreamOrderRecord records o, placed now, as the upstream order of
	// its Hallmark order and backend, in a compare-and-swap: with
	// replaces "" it is the first, and with replaces an upstream order URL
	// it takes the place of that one (refused by the upstream, or placed
	// by another account). ErrConflict when the journal holds another
	// (another attempt recorded its own meanwhile): o is then not
	// recorded, and must not be finalized.
	UpstreamOrderRecord(ctx context.Context, o UpstreamOrder, replaces string) error
	// UpstreamOrderFor is the upstream order recorded for a Hallmark
	// order and backend; ErrNotFound when none is.
	UpstreamOrderFor(ctx context.Context, orderID, backend string) (*UpstreamOrder, error)
	// UpstreamOrdersOf lists the upstream orders recorded for a Hallmark
	// order, whatever the backend (none for an order that never reached a
	// relay), for the operator's view of the order.
	UpstreamOrdersOf(ctx context.Context, orderID string) ([]UpstreamOrder, error)
}
