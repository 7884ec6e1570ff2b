package store

import "context"

// Notices are the notifications the store queues by itself; the others
// ride with the writes they report ([notify], sqlstore.NotifyRoute).
type Notices interface {
	// NotifyExpiring queues certificate_expiring for up to limit live
	// certificates that expire within days and were not renewed, each
	// recorded so that it is reported once per threshold, and says how
	// many. It queues and records nothing when no destination takes the
	// event.
	NotifyExpiring(ctx context.Context, days, limit int) (int, error)
}
