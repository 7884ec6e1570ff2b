package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// lazyTx is a transaction whose BEGIN travels with its first statement or
// batch, in one batch (pgx.Batch.BeginTx): pgx's own Begin is a round trip
// of its own, and every write on the issuance path (claims, verdicts,
// issuance) is a short transaction whose BEGIN was one of its four to six
// round trips.
// From the first statement on, everything goes to the pgx transaction that
// batch began.
//
// It implements pgx.Tx so River inserts jobs on it as on pgx's own. One
// goroutine uses it, on one pooled connection, until Commit or Rollback.
type lazyTx struct {
	conn *pgx.Conn
	tx   pgx.Tx // nil until begun
	// closed: nothing more may be sent. Commit or Rollback was called
	// before anything began, or after the COMMIT went out early.
	closed bool
	// early: the COMMIT went out with the last batch (commitWith) and
	// Commit, which has nothing left to do, has not been called yet. The
	// pgx transaction must not be used again.
	early bool
	// atCommit are statements held back to travel with COMMIT
	// (holdForCommit).
	atCommit []*pgx.QueuedQuery
	// ahead are statements held back to travel in front of whatever the
	// transaction sends next (sendAhead), and readAhead reads their
	// results from that batch before anything else is read from it.
	ahead     []*pgx.QueuedQuery
	readAhead func(pgx.BatchResults) error
	// notify, set by commitWithInsert: River's job insert, when it comes,
	// goes out with this notification and the COMMIT after it. notified
	// is what notify said once it went out, so River's own notification
	// after the COMMIT can be checked against it.
	notify   *insertNotify
	notified *insertNotify
}

var _ pgx.Tx = (*lazyTx)(nil)

// begin begins the transaction, for the calls that cannot carry BEGIN
// (with any statements sent ahead).
func (t *lazyTx) begin(ctx context.Context) (pgx.Tx, error) {
	if t.closed || t.early {
		return nil, pgx.ErrTxClosed
	}
	if t.tx == nil || len(t.ahead) > 0 {
		if err := t.SendBatch(ctx, &pgx.Batch{}).Close(); err != nil {
			return nil, err
		}
	}
	return t.tx, nil
}

// sendAhead holds b's statements back to go out in front of the next
// statement or batch sent in the transaction, whoever sends it, and read
// reads their results there. Claims use it so that River's job insert,
// which River sends itself, travels with the claim: one round trip for
// both. Statements still held when the transaction commits go with the
// COMMIT; when it rolls back, they are dropped unsent and read is never
// called.
func (t *lazyTx) sendAhead(b *pgx.Batch, read func(pgx.BatchResults) error) {
	t.ahead = append(t.ahead, b.QueuedQueries...)
	prev := t.readAhead
	t.readAhead = func(br pgx.BatchResults) error {
		if prev != nil {
			if err := prev(br); err != nil {
				return err
			}
		}
		return read(br)
	}
}

// direct: a statement may go straight to the begun pgx transaction, as
// nothing is held to go in front of it.
func (t *lazyTx) direct() bool { return t.tx != nil && len(t.ahead) == 0 }

// first sends BEGIN and the transaction's first statement as one batch
// (SendBatch). The caller reads the statement's result from the batch and
// closes it before the transaction is used again.
func (t *lazyTx) first(ctx context.Context, sql string, args []any) pgx.BatchResults {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	return t.SendBatch(ctx, b)
}

func (t *lazyTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.early && holdForCommit(sql) {
		return t.afterCommitNotify(ctx, sql, args)
	}
	if t.closed || t.early {
		return pgconn.CommandTag{}, pgx.ErrTxClosed
	}
	if t.tx != nil && holdForCommit(sql) {
		t.atCommit = append(t.atCommit, &pgx.QueuedQuery{SQL: sql, Arguments: args})
		return pgconn.NewCommandTag("SELECT 1"), nil
	}
	if t.direct() {
		return t.tx.Exec(ctx, sql, args...)
	}
	br := t.first(ctx, sql, args)
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (t *lazyTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.closed || t.early {
		return nil, pgx.ErrTxClosed
	}
	if t.notify != nil && strings.HasPrefix(sql, riverInsertSQL) {
		return t.insertAndCommit(ctx, sql, args)
	}
	if t.direct() {
		return t.tx.Query(ctx, sql, args...)
	}
	br := t.first(ctx, sql, args)
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// batchRows are the first statement's rows; closing them closes the batch,
// which frees the connection for the next statement.
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		r.err = r.br.Close()
		r.br = nil
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

func (t *lazyTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := t.Query(ctx, sql, args...)
	return &row{rows: rows, err: err}
}

// row is pgx.Row over Query, as pgx's own (unexported) one is.
type row struct {
	rows pgx.Rows
	err  error
}

func (r *row) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// SendBatch sends b in the transaction. Before the transaction has begun,
// BEGIN goes first in the same batch, and statements held to go ahead
// (sendAhead) go next; their results are read here, so the caller reads
// b's results as if the transaction had begun, and those statements had
// run, before.
func (t *lazyTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.closed || t.early {
		return errBatch{pgx.ErrTxClosed}
	}
	if t.direct() {
		return t.tx.SendBatch(ctx, b)
	}
	all := &pgx.Batch{}
	began := t.tx == nil
	if began {
		all.BeginTx(pgx.TxOptions{})
	}
	all.QueuedQueries = slices.Concat(all.QueuedQueries, t.ahead, b.QueuedQueries)
	read := t.readAhead
	t.ahead, t.readAhead = nil, nil
	var br pgx.BatchResults
	if began {
		br = t.conn.SendBatch(ctx, all)
		t.tx = br.Tx()
		// BEGIN fails only when the whole batch does (pgx prepares every
		// statement before running any); closing it then closes t.tx too.
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return errBatch{err}
		}
	} else {
		br = t.tx.SendBatch(ctx, all)
	}
	if read != nil {
		if err := read(br); err != nil {
			// PostgreSQL skips the rest of the batch after a failed
			// statement: b's statements did not run.
			_ = br.Close()
			return errBatch{err}
		}
	}
	return br
}

// errBatch answers every read of a batch that could not be sent.
type errBatch struct{ err error }

func (e errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, e.err }
func (e errBatch) Query() (pgx.Rows, error)         { return nil, e.err }
func (e errBatch) QueryRow() pgx.Row                { return &row{err: e.err} }
func (e errBatch) Close() error                     { return e.err }
func (e errBatch) Tx() pgx.Tx                       { return nil }

func (t *lazyTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	tx, err := t.begin(ctx)
	if err != nil {
		return 0, err
	}
	return tx.CopyFrom(ctx, table, cols, src)
}

func (t *lazyTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.conn.Prepare(ctx, name, sql)
}

// Begin is a savepoint in the transaction, as with pgx's own.
func (t *lazyTx) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := t.begin(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Begin(ctx)
}

// LargeObjects are not used by Hallmark; before the transaction begins
// there are none to offer.
func (t *lazyTx) LargeObjects() pgx.LargeObjects {
	if t.tx == nil {
		return pgx.LargeObjects{}
	}
	return t.tx.LargeObjects()
}

func (t *lazyTx) Conn() *pgx.Conn { return t.conn }

// Commit commits the transaction; one that never began has nothing to
// commit, and one whose last batch carried its COMMIT (commitWith) is done.
// Statements held for the commit, or still held to go ahead, travel with
// it, in one round trip.
func (t *lazyTx) Commit(ctx context.Context) error {
	switch {
	case t.early:
		t.early, t.closed = false, true
		return nil
	case t.closed:
		return pgx.ErrTxClosed
	case t.tx == nil && len(t.ahead) == 0:
		return t.endUnbegun()
	case len(t.atCommit) > 0 || len(t.ahead) > 0:
		if err := t.commitWith(ctx, &pgx.Batch{}).Close(); err != nil {
			return err
		}
		return t.Commit(ctx) // the COMMIT went out early: close as above
	}
	return t.tx.Commit(ctx)
}

func (t *lazyTx) Rollback(ctx context.Context) error {
	t.atCommit, t.ahead, t.readAhead = nil, nil, nil
	switch {
	case t.early, t.closed:
		t.early, t.closed = false, true
		return pgx.ErrTxClosed
	case t.tx == nil:
		return t.endUnbegun()
	}
	return t.tx.Rollback(ctx)
}

// Holding back statements for COMMIT.
//
// River notifies its workers of an insert with a pg_notify statement of its
// own after the insert (PGNotifyMany). PostgreSQL delivers a notification
// only when its transaction commits, wherever in the transaction it was
// sent, so the statement can go out with COMMIT instead: one round trip
// fewer for every claim that queues a job. Its error, should it have one,
// fails the commit, which rolls everything back as failing at once would
// have. TestRiverNotifyHeld fails if River renames the statement.
const riverNotifySQL = "-- name: PGNotifyMany :exec"

func holdForCommit(sql string) bool { return strings.HasPrefix(sql, riverNotifySQL) }

// commitWith sends b, then the statements held for the commit, then COMMIT,
// as one batch (with BEGIN first if the transaction has not begun). The
// caller reads b's results and closes the batch; Close reports a failed
// COMMIT (a transaction that had failed commits as ROLLBACK, which is
// pgx.ErrTxCommitRollback here as from pgx's own Commit). If any statement
// fails, PostgreSQL skips the rest of the batch, COMMIT included, and the
// transaction stays open for Rollback.
func (t *lazyTx) commitWith(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.closed || t.early {
		return errBatch{pgx.ErrTxClosed}
	}
	all := &pgx.Batch{QueuedQueries: slices.Concat(b.QueuedQueries, t.atCommit, []*pgx.QueuedQuery{{SQL: "COMMIT"}})}
	t.atCommit = nil
	return &commitResults{BatchResults: t.SendBatch(ctx, all), t: t, total: len(all.QueuedQueries)}
}

// commitResults are a commitWith batch's results: the caller reads its
// statements', and Close reads whatever the caller left, the held
// statements' and COMMIT's.
type commitResults struct {
	pgx.BatchResults
	t     *lazyTx
	read  int // results the caller has taken
	total int // results in the batch, COMMIT's last
}

func (r *commitResults) Exec() (pgconn.CommandTag, error) {
	r.read++
	return r.BatchResults.Exec()
}

func (r *commitResults) Query() (pgx.Rows, error) {
	r.read++
	return r.BatchResults.Query()
}

func (r *commitResults) QueryRow() pgx.Row {
	r.read++
	return r.BatchResults.QueryRow()
}

func (r *commitResults) Close() error {
	var err error
	for i := r.read; i < r.total && err == nil; i++ {
		var tag pgconn.CommandTag
		tag, err = r.BatchResults.Exec()
		if err == nil && i == r.total-1 {
			if tag.String() == "ROLLBACK" {
				err = pgx.ErrTxCommitRollback
			} else {
				r.t.early = true
			}
		}
	}
	r.read = r.total
	if cerr := r.BatchResults.Close(); err == nil {
		err = cerr
	}
	if err != nil && r.t.early {
		// The batch's own close failed after COMMIT succeeded: the
		// commit stands.
		err = nil
	}
	return err
}

// endUnbegun ends a transaction that never sent BEGIN: there is nothing on
// the server to commit or roll back, only the second end to refuse.
func (t *lazyTx) endUnbegun() error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	t.closed = true
	return nil
}

// A claim in one round trip.
//
// A claim (a challenge's or an order's compare-and-swap and River's job
// insert) used to take two round trips: BEGIN, the swap and the insert,
// then River's notification and COMMIT. commitWithInsert makes it one:
// the COMMIT goes out with the insert, and the notification River would
// send after it goes in front of the COMMIT. Two things make that safe:
//   - the swap must fail when it loses, not return no row (the caller's
//     SQL does it: sqlstore.mustMove), because its result is read after
//     the COMMIT has run; a failed statement skips the rest of the batch,
//     COMMIT included, and the transaction rolls back as before;
//   - the notification is River's as River would send it (insertNotify):
//     River's own, arriving after the COMMIT, is dropped when it says
//     the same, and sent on its own otherwise (a River upgrade that
//     changes the payload costs a round trip, never a missed wake-up).

// riverInsertSQL begins River's job insert (JobInsertFastMany).
// TestWriteRoundTrips fails if River renames it (a claim is two round
// trips again).
const riverInsertSQL = "-- name: JobInsertFastMany"

// riverInsertTopic is the topic River's insert notification uses
// (notifier.NotificationTopicInsert), under the connection's schema.
const riverInsertTopic = "river_insert"

// insertNotify is River's insert notification for one queue.
type insertNotify struct{ queue string }

func (n *insertNotify) payload() string { return fmt.Sprintf("{\"queue\": %q}", n.queue) }

func (n *insertNotify) query() *pgx.QueuedQuery {
	return &pgx.QueuedQuery{
		SQL:       "SELECT pg_notify(current_schema() || '." + riverInsertTopic + "', $1)",
		Arguments: []any{n.payload()},
	}
}

// sameAs reports whether River's PGNotifyMany arguments (schema, topic,
// payloads) say what n said.
func (n *insertNotify) sameAs(args []any) bool {
	if n == nil || len(args) != 3 {
		return false
	}
	schema, ok := args[0].(pgtype.Text)
	if !ok || (schema.Valid && schema.String != "") {
		return false
	}
	topic, ok := args[1].(string)
	if !ok || topic != riverInsertTopic {
		return false
	}
	payloads, ok := args[2].([]string)
	return ok && len(payloads) == 1 && payloads[0] == n.payload()
}

// commitWithInsert arms t: River's next job insert goes out with a
// notification for queue and the COMMIT, in one batch (with BEGIN and
// the statements sent ahead in front, if those have not gone yet).
// disarm undoes it if no insert came.
func (t *lazyTx) commitWithInsert(queue string) (disarm func()) {
	t.notify = &insertNotify{queue: queue}
	return func() { t.notify = nil }
}

// insertAndCommit sends River's job insert with the notification and the
// COMMIT (commitWith). River reads the insert's rows; closing them reads
// the COMMIT's result (commitResults), which leaves t early when it
// committed.
func (t *lazyTx) insertAndCommit(ctx context.Context, sql string, args []any) (pgx.Rows, error) {
	n := t.notify
	t.notify = nil
	t.atCommit = append(t.atCommit, n.query())
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.commitWith(ctx, b)
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	t.notified = n
	return &committingRows{batchRows{Rows: rows, br: br}}, nil
}

// committingRows are the insert's rows in a batch that ends with COMMIT.
// The batch is read to its end, COMMIT included, as soon as the last row
// has been read, not only on Close: a caller checks Err before it
// closes (River's generated code closes in a defer), and a failed COMMIT
// must be its error.
type committingRows struct{ batchRows }

func (r *committingRows) Next() bool {
	if r.batchRows.Next() {
		return true
	}
	r.Close()
	return false
}

// afterCommitNotify answers River's insert notification arriving after
// the COMMIT went out with the insert: nothing to do when the batch
// already said the same; else it goes now, on its own (a notification
// needs no transaction).
func (t *lazyTx) afterCommitNotify(ctx context.Context, sql string, args []any) (pgconn.CommandTag, error) {
	if t.notified.sameAs(args) {
		return pgconn.NewCommandTag("SELECT 1"), nil
	}
	return t.conn.Exec(ctx, sql, args...)
}
