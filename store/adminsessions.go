package store

import (
	"context"
	"time"
)

// AdminSessions are the admin panel's sign-ins, kept in the database so
// that every frontend replica sees the same ones and signing out ends a
// session everywhere at once. The panel passes an opaque id (a hash of the
// cookie's session id); expiry is on the database's clock.
type AdminSessions interface {
	// AdminSessionCreate records a live session of operator that expires
	// ttl from now, and removes every session already expired, and
	// records ev (the sign-in) in the same transaction. A second session
	// with the same id is ErrConflict.
	AdminSessionCreate(ctx context.Context, id, operator string, ttl time.Duration, ev AuditEvent) error
	// AdminSessionOperator returns the operator of a live session;
	// ErrNotFound when the id was never created, has been ended, or has
	// expired.
	AdminSessionOperator(ctx context.Context, id string) (string, error)
	// AdminSessionEnd ends a session. Ending one that is gone already
	// (ended, expired and removed, never created) is not an error. ev
	// (the sign-out) is recorded in the same transaction.
	AdminSessionEnd(ctx context.Context, id string, ev AuditEvent) error
}
