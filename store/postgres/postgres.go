package postgres

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/sqlstore"
)

// New returns the store on pool. ins inserts jobs on the store's own
// transactions (a pgx.Tx). Close closes the pool.
func New(pool *pgxpool.Pool, ins jobs.Inserter) store.Store {
	return sqlstore.New(Conn(pool), sqlstore.Postgres, ins)
}

// Connect opens a pool for url of maxConns connections; 0 is
// DefaultConns.
func Connect(ctx context.Context, url string, maxConns int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parsing the PostgreSQL URL: %w", err)
	}
	dropReadOnly(cfg) // failover.go
	cfg.MaxConns = int32(maxConns)
	if maxConns <= 0 {
		cfg.MaxConns = int32(DefaultConns())
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL at %s: %w", cfg.ConnConfig.Host, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connecting to PostgreSQL at %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	return pool, nil
}

// DefaultConns is a process's pool size when the configuration leaves it
// to Hallmark: four connections per CPU this process may use. Each
// connection is a PostgreSQL backend process, and more backends busy at
// once than the machine has cores to run them make PostgreSQL spend its
// CPU switching between them: on two cores, 20 connections per process
// instead of 8 cost a third of the throughput. A request waiting for a
// connection costs less than that.
func DefaultConns() int { return 4 * runtime.GOMAXPROCS(0) }

// Conn adapts pool to sqlstore's executor (for the migration runner).
func Conn(pool *pgxpool.Pool) sqlstore.Conn { return conn{pool} }

type conn struct{ pool *pgxpool.Pool }

// InTx runs fn in a transaction whose BEGIN is sent with its first
// statement (lazyTx). A connection released mid-transaction, after a failed
// ROLLBACK, is closed by the pool rather than reused.
func (c conn) InTx(ctx context.Context, fn func(sqlstore.Tx) error) error {
	pc, err := c.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer pc.Release()
	tx := &lazyTx{conn: pc.Conn()}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	if err := fn(pgTx{tx}); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func (c conn) Ping(ctx context.Context) error { return c.pool.Ping(ctx) }

func (c conn) Close() error {
	c.pool.Close()
	return nil
}

func (c conn) Classify(err error) sqlstore.ErrorKind {
	if unavailable(err) {
		return sqlstore.ErrUnavailable
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return sqlstore.ErrOther
	}
	switch pe.Code {
	case "23505":
		return sqlstore.ErrUnique
	case "23503":
		return sqlstore.ErrForeignKey
	case "40001", "40P01":
		return sqlstore.ErrRetry
	case "22012":
		return sqlstore.ErrSwapLost
	}
	return sqlstore.ErrOther
}

type pgTx struct{ tx *lazyTx }

func (t pgTx) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := t.tx.Exec(ctx, q, args...)
	return tag.RowsAffected(), err
}

func (t pgTx) Query(ctx context.Context, q string, args ...any) (sqlstore.Rows, error) {
	rows, err := t.tx.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// Batch sends stmts as one pgx batch; a transaction that has not begun
// begins in it (lazyTx.SendBatch).
func (t pgTx) Batch(ctx context.Context, stmts []sqlstore.Stmt) ([]int64, error) {
	return sendBatch(ctx, t.tx.SendBatch, stmts)
}

// BatchCommit is Batch with the transaction's COMMIT, and any statements
// held for it, in the same batch (lazyTx.commitWith): the last round trip
// of a transaction does both.
func (t pgTx) BatchCommit(ctx context.Context, stmts []sqlstore.Stmt) ([]int64, error) {
	return sendBatch(ctx, t.tx.commitWith, stmts)
}

// BatchAhead sends stmts in front of whatever then sends first (River's
// job insert), in one batch, and reads their results there
// (lazyTx.sendAhead). If then sends nothing and succeeds, stmts go alone
// once it returns. A failed statement among stmts is the error: what
// followed it in the batch never ran.
func (t pgTx) BatchAhead(ctx context.Context, stmts []sqlstore.Stmt, then func() error) ([]int64, error) {
	b := &pgx.Batch{}
	for _, st := range stmts {
		b.Queue(st.SQL, st.Args...)
	}
	var n []int64
	var stmtErr error
	read := false
	t.tx.sendAhead(b, func(br pgx.BatchResults) error {
		read = true
		n, stmtErr = readResults(br, stmts)
		return stmtErr
	})
	thenErr := then()
	if !read && thenErr == nil {
		// then sent nothing: the statements go alone.
		if err := t.tx.SendBatch(ctx, &pgx.Batch{}).Close(); err != nil && stmtErr == nil {
			return n, err
		}
	}
	switch {
	case stmtErr != nil:
		return n, stmtErr
	case !read:
		return nil, thenErr // then failed before sending anything: stmts never ran
	}
	return n, thenErr
}

// BatchClaim is BatchAhead for a claim, in one round trip: the COMMIT
// goes out with River's job insert, with River's notification for queue
// before it (lazyTx.commitWithInsert). stmts must fail when the swap
// loses (sqlstore.mustMove); their results are read after the COMMIT ran.
// If then sends no insert, it is BatchAhead, and the transaction commits
// as usual.
func (t pgTx) BatchClaim(ctx context.Context, stmts []sqlstore.Stmt, queue string, then func() error) ([]int64, error) {
	disarm := t.tx.commitWithInsert(queue)
	defer disarm()
	return t.BatchAhead(ctx, stmts, then)
}

func (t pgTx) Raw() jobs.Tx { return t.tx }

// sendBatch sends stmts with send as one pgx batch, one round trip, and reads
// their results in order, stopping at the first that fails
// (sqlstore.Tx.Batch).
func sendBatch(ctx context.Context, send func(context.Context, *pgx.Batch) pgx.BatchResults, stmts []sqlstore.Stmt) ([]int64, error) {
	return sendBatchMeanwhile(ctx, send, stmts, nil)
}

// sendBatchMeanwhile is sendBatch with meanwhile, if not nil, run between
// the send and the reading of the results. pgx's SendBatch returns once
// the batch is written (its statements are prepared on this connection
// already but the first time), so the server works meanwhile.
func sendBatchMeanwhile(ctx context.Context, send func(context.Context, *pgx.Batch) pgx.BatchResults, stmts []sqlstore.Stmt, meanwhile func()) ([]int64, error) {
	if len(stmts) == 0 {
		return nil, nil
	}
	b := &pgx.Batch{}
	for _, st := range stmts {
		b.Queue(st.SQL, st.Args...)
	}
	br := send(ctx, b)
	if meanwhile != nil {
		meanwhile()
	}
	n, err := readResults(br, stmts)
	if err != nil {
		_ = br.Close()
		return n, err
	}
	return n, br.Close()
}

// readResults reads stmts' results from br in order, stopping at the first
// that fails: its error, with the results of those before it.
func readResults(br pgx.BatchResults, stmts []sqlstore.Stmt) ([]int64, error) {
	n := make([]int64, 0, len(stmts))
	for _, st := range stmts {
		k, err := batchResult(br, st)
		if err != nil {
			return n, err
		}
		n = append(n, k)
	}
	return n, nil
}

// batchResult reads the next result of br, st's: the rows it affected, or
// with Dest whether it returned a row, scanned into Dest, or with Each the
// rows Each read.
func batchResult(br pgx.BatchResults, st sqlstore.Stmt) (int64, error) {
	if st.Each != nil {
		rows, err := br.Query()
		if err != nil {
			return 0, err
		}
		return sqlstore.EachRow(rows, st.Each)
	}
	dest := st.Dest
	if dest == nil {
		tag, err := br.Exec()
		return tag.RowsAffected(), err
	}
	rows, err := br.Query()
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	if !rows.Next() {
		return 0, rows.Err()
	}
	if err := rows.Scan(dest...); err != nil {
		return 0, err
	}
	rows.Close()
	return 1, rows.Err()
}

// Migrate applies Hallmark's pending migrations (not River's).
func Migrate(ctx context.Context, pool *pgxpool.Pool) ([]int, error) {
	return sqlstore.Migrate(ctx, Conn(pool), sqlstore.Postgres)
}

// MigrationStatus reports applied and pending versions.
func MigrationStatus(ctx context.Context, pool *pgxpool.Pool) (sqlstore.MigrationStatus, error) {
	return sqlstore.Status(ctx, Conn(pool), sqlstore.Postgres)
}
