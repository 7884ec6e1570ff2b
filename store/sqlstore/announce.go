package sqlstore

import (
	"context"
	"fmt"
)

// VerdictChannel is the PostgreSQL channel a verdict is announced on, in
// the verdict's own transaction (NOTIFY is delivered at its commit, and
// never if it rolls back): the payload is the subject's ID, a challenge's
// or an order's. Every frontend LISTENs on it (store/postgres.Listen) to
// answer the requests waiting for that verdict (protocol/verdict).
const VerdictChannel = "hallmark_verdict"

// announce queues on b the announcement of a verdict on subjectID, where
// the dialect has one. It adds no round trip: b goes with the verdict's
// other statements.
func (s *Store) announce(b *batch, subjectID string) {
	if s.d.announce != "" {
		b.exec("announcing the verdict on "+subjectID, s.d.announce, subjectID)
	}
}

// settledSQL selects which of up to maxRowsPerStatement IDs (%s: their
// placeholders) are a challenge or an order no longer processing.
const settledSQL = `SELECT id FROM challenges WHERE id IN (%[1]s) AND status <> 'processing'
UNION ALL SELECT id FROM orders WHERE id IN (%[1]s) AND status <> 'processing'`

// Settled is which of ids, challenges' or orders', are no longer
// processing, in one read (a statement per maxRowsPerStatement IDs, sent
// together): SQLite's frontend polls it for the subjects its requests wait
// on, where PostgreSQL announces each verdict (VerdictChannel). An ID of
// neither is not among them.
func (s *Store) Settled(ctx context.Context, ids []string) ([]string, error) {
	var out []string
	err := s.autocommit(ctx, func(t *txn) error {
		out = out[:0]
		var b batch
		for rest := ids; len(rest) > 0; {
			n := min(len(rest), maxRowsPerStatement)
			args := make([]any, n)
			for i, id := range rest[:n] {
				args[i] = id
			}
			b.each("reading which subjects have their verdict", func(r Rows) error {
				var id string
				if err := r.Scan(&id); err != nil {
					return err
				}
				out = append(out, id)
				return nil
			}, settledQuery(n), args...)
			rest = rest[n:]
		}
		_, err := t.send(ctx, &b)
		return err
	})
	return out, err
}

// settledQuery is settledSQL for n IDs.
func settledQuery(n int) string { return fmt.Sprintf(settledSQL, paramList(n)) }
