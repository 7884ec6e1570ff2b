package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/riverqueue/river"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// Store implements store.Store on a Conn.
type Store struct {
	c   Conn
	d   *Dialect
	ins jobs.Inserter
	// mem is SQLite's consumed-nonce set (memnonces.go); nil on
	// PostgreSQL, whose set is a table every replica shares.
	mem *memNonces
	// issuers are those this store has registered (issuers.go).
	issuers registered
	// route names the destinations of each event ([notify]); nil: none.
	route func(event string) []string
}

var _ store.Store = (*Store)(nil)

// New returns the store on c. ins inserts jobs inside the store's
// transactions; it must belong to the same database.
func New(c Conn, d *Dialect, ins jobs.Inserter) *Store {
	s := &Store{c: c, d: d, ins: ins}
	if d == SQLite {
		s.mem = newMemNonces(memNoncesMax)
	}
	return s
}

// Dialect names the store's SQL dialect.
func (s *Store) Dialect() *Dialect { return s.d }

// enqueue inserts a job on the operation's own transaction, so the job and
// the row change that needs it commit (or roll back) together.
func (s *Store) enqueue(ctx context.Context, t *txn, args river.JobArgs) error {
	_, err := s.enqueueJob(ctx, t, args)
	return err
}

// enqueueJob is enqueue returning the job's id: the one inserted, or the
// outstanding one River's uniqueness kept instead.
func (s *Store) enqueueJob(ctx context.Context, t *txn, args river.JobArgs) (int64, error) {
	id, _, err := s.insertJob(ctx, t, args)
	return id, err
}

// insertJob is enqueueJob saying whether the job is new: false when a
// unique job's outstanding twin was kept instead, whose id it returns.
func (s *Store) insertJob(ctx context.Context, t *txn, args river.JobArgs) (int64, bool, error) {
	if s.ins == nil {
		return 0, false, fmt.Errorf("enqueueing %s: the store was built without a job inserter", args.Kind())
	}
	id, inserted, err := s.ins.InsertTx(ctx, t.raw.Raw(), args)
	if err != nil {
		return 0, false, fmt.Errorf("enqueueing %s: %w", args.Kind(), err)
	}
	return id, inserted, nil
}

// Now is one autocommitted statement: reading the clock needs no
// transaction around it.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var now time.Time
	err := s.autocommit(ctx, func(t *txn) error {
		return t.queryRow(ctx, `SELECT {now}`).Scan(ts(&now))
	})
	return now, err
}

func (s *Store) Ping(ctx context.Context) error { return s.outage(s.c.Ping(ctx)) }

// Close closes the database handle the store was built on.
func (s *Store) Close() error { return s.c.Close() }

// --- pagination ---

const defaultPageLimit, maxPageLimit = 50, 1000

// page turns a Page into a seq bound and a limit; it fetches one row more
// than the limit to learn whether there is a next page.
func page(p store.Page) (before int64, limit int, err error) {
	before = math.MaxInt64
	if p.After != "" {
		before, err = strconv.ParseInt(p.After, 10, 64)
		if err != nil || before <= 0 {
			return 0, 0, fmt.Errorf("page cursor %q: %w", p.After, store.ErrBadCursor)
		}
	}
	limit = p.Limit
	if limit <= 0 {
		limit = defaultPageLimit
	}
	limit = min(limit, maxPageLimit)
	return before, limit, nil
}

// cursor trims a fetched page of limit+1 rows and returns the next cursor.
// listPage runs a newest-first keyset query and returns one page and the
// cursor of the next. The query's last two placeholders are the seq bound and
// the row limit, which listPage appends to args; scan reads one row and its
// seq. fill, when set, completes the rows inside the same transaction.
func listPage[T any](ctx context.Context, s *Store, p store.Page, scan func(Rows, *int64) (T, error), fill func(*txn, []T) error, query string, args ...any) ([]T, string, error) {
	before, limit, err := page(p)
	if err != nil {
		return nil, "", err
	}
	var out []T
	var seqs []int64
	err = s.inTx(ctx, func(t *txn) error {
		out, seqs = nil, nil
		err := collect(ctx, t, func(r Rows) error {
			var seq int64
			v, err := scan(r, &seq)
			if err != nil {
				return err
			}
			out, seqs = append(out, v), append(seqs, seq)
			return nil
		}, query, append(args, before, limit+1)...)
		if err != nil || fill == nil {
			return err
		}
		return fill(t, out)
	})
	if err != nil {
		return nil, "", err
	}
	n, next := cursor(seqs, limit)
	return out[:n], next, nil
}

func cursor(seqs []int64, limit int) (n int, next string) {
	if len(seqs) > limit {
		return limit, strconv.FormatInt(seqs[limit-1], 10)
	}
	return len(seqs), ""
}

// --- JSON columns ---

func problemText(p *acme.Problem) (string, error) {
	if p == nil {
		return "", nil
	}
	b, err := json.Marshal(p)
	return string(b), err
}

func parseProblem(s string) (*acme.Problem, error) {
	if s == "" {
		return nil, nil
	}
	var p acme.Problem
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		return nil, fmt.Errorf("decoding stored problem: %w", err)
	}
	return &p, nil
}

func jsonText(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
