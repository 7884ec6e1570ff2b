package sqlstore

import "context"

// Autocommitter is a Conn that can also run statements outside an explicit
// transaction, each committing on its own. Reads and single-statement
// writes use it: on PostgreSQL BEGIN and COMMIT are a round trip each, a
// third of a poll's database work, and on SQLite a read in BEGIN IMMEDIATE
// would queue behind every writer for no reason. Both dialects implement it.
//
// Consistency is what it was: PostgreSQL runs Hallmark's transactions at
// READ COMMITTED, where every statement already sees its own snapshot, and
// the reads routed here only follow statuses that move forward.
type Autocommitter interface {
	// Autocommit runs fn with a Tx whose statements each commit alone. Its
	// Raw is nil: a job can never be inserted there.
	Autocommit(ctx context.Context, fn func(Tx) error) error
}

// autocommit runs fn with autocommitted statements when the Conn can, else
// in a transaction (inTx).
func (s *Store) autocommit(ctx context.Context, fn func(t *txn) error) error {
	ac, ok := s.c.(Autocommitter)
	if !ok {
		return s.inTx(ctx, fn)
	}
	return s.outage(ac.Autocommit(ctx, func(raw Tx) error { return fn(&txn{raw: raw, d: s.d, c: s.c}) }))
}

// autocommitted is autocommit for a read that returns what fn read.
func autocommitted[T any](ctx context.Context, s *Store, fn func(t *txn) (T, error)) (T, error) {
	var out T
	err := s.autocommit(ctx, func(t *txn) (err error) {
		out, err = fn(t)
		return err
	})
	return out, err
}
