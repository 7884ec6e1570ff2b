package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/hallmark-ca/hallmark/store"
)

// txn is a Tx that expands the dialect's tokens and maps constraint errors
// to the store's sentinels.
type txn struct {
	raw Tx
	d   *Dialect
	c   Conn
	// open: more statements follow what a store method sends (an
	// operator's action and then its audit event), so sendLast must not
	// commit early.
	open bool
}

func (t *txn) mapErr(err error) error {
	if err == nil {
		return nil
	}
	switch t.c.Classify(err) {
	case ErrUnique:
		return fmt.Errorf("%w: %v", store.ErrConflict, err)
	case ErrForeignKey:
		return fmt.Errorf("%w: a referenced record does not exist: %v", store.ErrNotFound, err)
	}
	return err
}

// customPlans has the rest of t plan each statement for its arguments and
// the tables as they now are, never reusing a plan its connection kept
// from when they were small: for the rare transactions over many rows
// (bulk revocation, deactivation, the CRL views), whose planning costs
// less than the scan such a plan may be.
func (t *txn) customPlans(ctx context.Context) error {
	if t.d.customPlans == "" {
		return nil
	}
	_, err := t.exec(ctx, t.d.customPlans)
	return err
}

// plannedRead runs fn, a read, with customPlans: in a transaction where
// plans are kept (PostgreSQL's SET LOCAL needs one), as autocommit
// elsewhere (on SQLite a transaction takes the writer's lock).
func (s *Store) plannedRead(ctx context.Context, fn func(t *txn) error) error {
	if s.d.customPlans == "" {
		return s.autocommit(ctx, fn)
	}
	return s.inTx(ctx, func(t *txn) error {
		if err := t.customPlans(ctx); err != nil {
			return err
		}
		return fn(t)
	})
}

func (t *txn) exec(ctx context.Context, q string, args ...any) (int64, error) {
	n, err := t.raw.Exec(ctx, t.d.SQL(q), args...)
	return n, t.mapErr(err)
}

func (t *txn) query(ctx context.Context, q string, args ...any) (Rows, error) {
	rows, err := t.raw.Query(ctx, t.d.SQL(q), args...)
	return rows, t.mapErr(err)
}

// batch is statements that need nothing from each other's results, sent
// together (Tx.Batch): on PostgreSQL one round trip for all of them.
type batch struct {
	stmts []Stmt
	what  []string // what each statement does, for its error ("" for none)
}

// exec queues a statement and returns its index in send's results.
func (b *batch) exec(what, q string, args ...any) int {
	return b.add(what, Stmt{SQL: q, Args: args})
}

// scan queues a query whose first row send scans into dest.
func (b *batch) scan(what string, dest []any, q string, args ...any) int {
	return b.add(what, Stmt{SQL: q, Args: args, Dest: dest})
}

// each queues a query whose every row send passes to each.
func (b *batch) each(what string, each func(Rows) error, q string, args ...any) int {
	return b.add(what, Stmt{SQL: q, Args: args, Each: each})
}

func (b *batch) add(what string, st Stmt) int {
	b.stmts = append(b.stmts, st)
	b.what = append(b.what, what)
	return len(b.stmts) - 1
}

// send runs b's statements in order (Tx.Batch) and returns what each did.
// The statement that fails stops the batch; its error is mapped as exec
// maps it, after what that statement does.
func (t *txn) send(ctx context.Context, b *batch) ([]int64, error) {
	return t.sendWith(ctx, b, t.raw.Batch)
}

// lastBatcher is a Tx that can send its last statements together with its
// COMMIT (PostgreSQL: one round trip for both).
type lastBatcher interface {
	BatchCommit(ctx context.Context, stmts []Stmt) ([]int64, error)
}

// sendLast is send for a transaction's last statements: where the driver
// can, the transaction commits in the same round trip, and its commit
// error is sendLast's. Nothing may run on t after it; the transaction's
// own commit then has nothing left to do.
func (t *txn) sendLast(ctx context.Context, b *batch) ([]int64, error) {
	if lb, ok := t.raw.(lastBatcher); ok && !t.open {
		return t.sendWith(ctx, b, lb.BatchCommit)
	}
	return t.send(ctx, b)
}

// aheadBatcher is a Tx that can send statements in the same round trip as
// whatever the transaction sends next (PostgreSQL).
type aheadBatcher interface {
	BatchAhead(ctx context.Context, stmts []Stmt, then func() error) ([]int64, error)
}

// sendAhead runs b's statements, then then, which may send statements of
// its own (River's job insert); where the driver can, b's statements go in
// then's first round trip. Their results are read once then returns, so
// then must not depend on them: a claim queues its job before it knows it
// won, and rolls both back when it did not. A failed statement of b is the
// error in preference to then's.
func (t *txn) sendAhead(ctx context.Context, b *batch, then func() error) ([]int64, error) {
	if ab, ok := t.raw.(aheadBatcher); ok {
		return t.sendWith(ctx, b, func(ctx context.Context, stmts []Stmt) ([]int64, error) {
			return ab.BatchAhead(ctx, stmts, then)
		})
	}
	n, err := t.send(ctx, b)
	if err != nil {
		return n, err
	}
	return n, then()
}

// meanwhileBatcher is a Tx that can run work of the caller's between
// sending a batch and reading its results (PostgreSQL).
type meanwhileBatcher interface {
	BatchMeanwhile(ctx context.Context, stmts []Stmt, meanwhile func()) ([]int64, error)
}

// sendMeanwhile is send with meanwhile run while b's round trip is in
// flight; where the driver cannot, meanwhile runs first. A nil meanwhile
// is send.
func (t *txn) sendMeanwhile(ctx context.Context, b *batch, meanwhile func()) ([]int64, error) {
	if meanwhile == nil {
		return t.send(ctx, b)
	}
	if mb, ok := t.raw.(meanwhileBatcher); ok {
		return t.sendWith(ctx, b, func(ctx context.Context, stmts []Stmt) ([]int64, error) {
			return mb.BatchMeanwhile(ctx, stmts, meanwhile)
		})
	}
	meanwhile()
	return t.send(ctx, b)
}

// claimBatcher is a Tx that can send a claim in one round trip
// (PostgreSQL): its compare-and-swap in front of River's job insert, and
// the COMMIT, with the insert's notification for queue, behind it. The
// swap's statements must fail when it loses (mustMove): their results
// are read after the COMMIT has run.
type claimBatcher interface {
	BatchClaim(ctx context.Context, stmts []Stmt, queue string, then func() error) ([]int64, error)
}

// sendClaim is sendAhead for a claim's swap, b (one UPDATE ... RETURNING),
// and then, which queues the claim's job on queue. Where the driver can,
// the transaction commits in the same round trip as the job's insert, and
// a lost swap fails instead of moving nothing, skipping the insert and
// the COMMIT; either way, a swap that moved nothing is n[0] == 0 and the
// transaction must roll back. When sendClaim succeeds, the transaction may
// already have committed: nothing may run on t after it.
//
// b may hold more than one statement when each is such a check that must
// hold (claimSigned: the nonce's insert, the account's read, the swap): each then fails when it finds nothing, and any n[i] == 0 means
// the transaction must roll back.
func (t *txn) sendClaim(ctx context.Context, b *batch, queue string, then func() error) ([]int64, error) {
	cb, ok := t.raw.(claimBatcher)
	if !ok {
		return t.sendAhead(ctx, b, then)
	}
	every := make([]int, len(b.stmts))
	for i := range every {
		every[i] = i
	}
	must := mustMoveAt(b, every...)
	n, err := t.sendWith(ctx, &must, func(ctx context.Context, stmts []Stmt) ([]int64, error) {
		return cb.BatchClaim(ctx, stmts, queue, then)
	})
	if err != nil && t.c.Classify(err) == ErrSwapLost {
		return make([]int64, len(b.stmts)), nil
	}
	return n, err
}

// sendSwapLast is sendLast for a batch whose statements at swaps are
// compare-and-swaps (UPDATE ... RETURNING, one row at most, queued with
// scan) or checks (a SELECT of one row) that the statements after them
// must not run without. Where the driver can (PostgreSQL), the whole batch
// and the COMMIT go in one round trip and a lost swap fails (mustMove),
// skipping what follows it, COMMIT included; elsewhere the batch goes in
// two sends and stops after the last swap when one moved nothing. won is
// false when a swap moved nothing: the transaction must then roll back.
// Nothing may run on t after it either way (on PostgreSQL a lost swap has
// aborted the transaction).
func (t *txn) sendSwapLast(ctx context.Context, b *batch, swaps ...int) (n []int64, won bool, err error) {
	if _, ok := t.raw.(lastBatcher); ok {
		must := mustMoveAt(b, swaps...)
		n, err = t.sendLast(ctx, &must)
		if err != nil && t.c.Classify(err) == ErrSwapLost {
			return n, false, nil
		}
		return n, err == nil, err
	}
	last := slices.Max(swaps)
	head := batch{stmts: b.stmts[:last+1], what: b.what[:last+1]}
	n, err = t.send(ctx, &head)
	if err != nil || slices.ContainsFunc(swaps, func(i int) bool { return n[i] == 0 }) {
		return n, false, err
	}
	tail := batch{stmts: b.stmts[last+1:], what: b.what[last+1:]}
	rest, err := t.sendLast(ctx, &tail)
	return append(n, rest...), err == nil, err
}

// mustMoveAt is a copy of b whose statements at idx are rewritten by
// mustMove. A copy: the caller's batch goes out as built again if the
// transaction is retried (retrying).
func mustMoveAt(b *batch, idx ...int) batch {
	must := *b
	must.stmts = slices.Clone(b.stmts)
	for _, i := range idx {
		must.stmts[i].SQL = mustMove(b.stmts[i].SQL)
	}
	return must
}

// mustMove makes a compare-and-swap (UPDATE ... RETURNING, one row at
// most) fail when it moves nothing, rather than return no row: one
// divided by the count of rows it moved is a division by zero (SQLSTATE
// 22012, ErrSwapLost), which aborts the transaction, so a COMMIT sent
// behind it does not commit. The LEFT JOIN keeps the count's row, so the
// division is always evaluated; when the swap moves its row, the
// statement returns it as the UPDATE would have.
func mustMove(swap string) string {
	return "WITH moved AS (" + swap + ") SELECT moved.* FROM (SELECT 1 / count(*) AS won FROM moved) AS swap LEFT JOIN moved ON swap.won = 1"
}

func (t *txn) sendWith(ctx context.Context, b *batch, run func(context.Context, []Stmt) ([]int64, error)) ([]int64, error) {
	if len(b.stmts) == 0 {
		return nil, nil
	}
	stmts := make([]Stmt, len(b.stmts))
	for i, st := range b.stmts {
		st.SQL = t.d.SQL(st.SQL)
		stmts[i] = st
	}
	n, err := run(ctx, stmts)
	if err == nil {
		return n, nil
	}
	err = t.mapErr(err)
	if i := len(n); i < len(b.what) && b.what[i] != "" {
		err = fmt.Errorf("%s: %w", b.what[i], err)
	}
	return n, err
}

// row is one row of a query, read by Scan; no rows is store.ErrNotFound.
type row struct {
	t    *txn
	ctx  context.Context
	q    string
	args []any
}

func (t *txn) queryRow(ctx context.Context, q string, args ...any) row {
	return row{t: t, ctx: ctx, q: q, args: args}
}

func (r row) Scan(dest ...any) error {
	rows, err := r.t.query(r.ctx, r.q, r.args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return r.t.mapErr(err)
		}
		return store.ErrNotFound
	}
	if err := rows.Scan(dest...); err != nil {
		return r.t.mapErr(err)
	}
	rows.Close()
	return r.t.mapErr(rows.Err())
}

// collect reads every row of a query with scan, closing the rows before it
// returns so the transaction can run its next statement.
func collect(ctx context.Context, t *txn, scan func(Rows) error, q string, args ...any) error {
	rows, err := t.query(ctx, q, args...)
	if err != nil {
		return err
	}
	_, err = EachRow(rows, scan)
	return t.mapErr(err)
}

// inTx runs fn in one transaction, again (up to three times in all) when
// the database reports a deadlock or serialization failure.
func (s *Store) inTx(ctx context.Context, fn func(t *txn) error) error {
	return s.retrying(ctx, s.c.InTx, fn)
}

// retrying is inTx with run in place of Conn.InTx.
func (s *Store) retrying(ctx context.Context, run func(context.Context, func(Tx) error) error, fn func(t *txn) error) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		err = run(ctx, func(raw Tx) error { return fn(&txn{raw: raw, d: s.d, c: s.c}) })
		if err == nil || s.c.Classify(err) != ErrRetry {
			return s.outage(err)
		}
	}
	return s.outage(err)
}

// outage marks err store.ErrUnavailable when the Conn classes it as the
// database being unavailable, or as contention (busy, deadlock) still
// there when the retries ran out: the caller can only try again later.
// Every store call returns through it (retrying, autocommit, Ping).
func (s *Store) outage(err error) error {
	if err == nil || errors.Is(err, store.ErrUnavailable) {
		return err
	}
	switch s.c.Classify(err) {
	case ErrUnavailable, ErrRetry:
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}
