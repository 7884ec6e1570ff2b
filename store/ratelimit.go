package store

import (
	"context"
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
// process. A count is read, never reserved: requests racing on two
// replicas may both pass at the edge of a limit.
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
