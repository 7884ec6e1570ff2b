package sqlstore

import (
	"context"
	"fmt"
)

// reloadRequestedSQL names the action as a constant, so that PostgreSQL's
// planner, generic plans included, may use the partial index of migration
// 0025; store.ActionReloadRequested is the same text.
const reloadRequestedSQL = `SELECT COALESCE(MAX(id), 0) FROM audit_events WHERE action = 'config.reload_requested'`

func (s *Store) ReloadRequested(ctx context.Context) (int64, error) {
	var id int64
	err := s.autocommit(ctx, func(t *txn) error { return t.queryRow(ctx, reloadRequestedSQL).Scan(&id) })
	if err != nil {
		return 0, fmt.Errorf("reading the latest reload request: %w", err)
	}
	return id, nil
}
