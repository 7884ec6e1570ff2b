package store

import (
	"context"
	"fmt"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// RateCount is what a rate limit counted: how many events fall in its
// window, when the oldest of them was (for a windowed limit a slot opens at
// Oldest + window) and the database clock the count was taken at, so every
// replica computes Retry-After from one clock.
type RateCount struct {
	Count  int
	Oldest time.Time // zero when Count is 0
	Now    time.Time
}

// RateLimits counts what the frontend's rate limits need, from the records
// themselves, so every replica sees the same counts and nothing is kept per
// process. These counts are reads: a limit on what a request creates
// itself is reserved in the creating transaction instead (OrderLimits).
// What the worker creates later (certificates, failed validations) is
// read, so requests racing on two replicas may both pass at its edge.
type RateLimits interface {
	// RateOrders counts the account's orders created in the last window.
	RateOrders(ctx context.Context, accountID string, window time.Duration) (RateCount, error)
	// RateCertificates counts certificates issued in the last window that
	// name registeredDomain or a name below it, compared without case and
	// at label boundaries (notexample.com is not below example.com); an IP
	// address counts only as itself.
	RateCertificates(ctx context.Context, registeredDomain string, window time.Duration) (RateCount, error)
	// RateFailedValidations counts the account's authorizations for id
	// that became invalid (a failed validation) in the last window.
	RateFailedValidations(ctx context.Context, accountID string, id acme.Identifier, window time.Duration) (RateCount, error)
	// RatePendingAuthzs counts the account's pending, unexpired
	// authorizations; Oldest is the soonest of their expiries, when a slot
	// opens at the latest.
	RatePendingAuthzs(ctx context.Context, accountID string) (RateCount, error)
}

// OrderLimits are the limits OrderCreate reserves a unit of in the order's
// own transaction: it locks the account's row (on PostgreSQL; SQLite's
// writers are serialized already), counts, and writes the order only
// within them, so newOrders racing on any number of frontends for the
// last unit admit exactly one. Zero is unlimited.
type OrderLimits struct {
	// Orders is the most orders the account may create per OrdersWindow.
	Orders       int
	OrdersWindow time.Duration
	// PendingAuthzs is the most pending, unexpired authorizations the
	// account may hold, counting the order's new ones that are pending.
	PendingAuthzs int
}

// Limit names of RateLimited, as [limits] names them.
const (
	LimitOrders        = "orders_per_account"
	LimitPendingAuthzs = "pending_authorizations_per_account"
)

// RateLimited is OrderCreate refusing an order over one of its
// OrderLimits: nothing was written.
type RateLimited struct {
	Limit string    // LimitOrders or LimitPendingAuthzs
	Max   int       // the limit
	Count RateCount // what the transaction counted
	// Opens is when a unit frees up on the database clock: the oldest
	// order's creation plus the window, or the soonest pending
	// authorization's expiry.
	Opens  time.Time
	Fresh  int           // the pending authorizations the order would have added
	Window time.Duration // LimitOrders' window
}

func (e *RateLimited) Error() string {
	return fmt.Sprintf("store: %s: the account has %d of %d", e.Limit, e.Count.Count, e.Max)
}
