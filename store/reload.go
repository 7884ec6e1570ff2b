package store

import "context"

// The audit actions of a configuration reload (docs/operations.md,
// "Reloading the configuration"): `hallmark reload` records the request,
// which every frontend and worker watches for, and each records the
// outcome of each attempt, a SIGHUP's or a request's.
const (
	ActionReloadRequested = "config.reload_requested"
	ActionReload          = "config.reload"
)

// Reloads is how processes on any host hear `hallmark reload`.
type Reloads interface {
	// ReloadRequested is the id of the newest config.reload_requested
	// audit event, 0 for none: a process that sees it grow reloads. One
	// read of a partial index (migration 0025), whatever the log's size.
	ReloadRequested(ctx context.Context) (int64, error)
}
