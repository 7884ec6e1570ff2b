package sqlstore

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
)

// Conn is a database as the store needs it. The dialect packages adapt a
// pgx pool and a database/sql handle to it.
type Conn interface {
	// InTx runs fn inside one transaction, committing when it returns nil.
	// On SQLite the transaction is BEGIN IMMEDIATE (a writer from the start).
	InTx(ctx context.Context, fn func(Tx) error) error
	Ping(ctx context.Context) error
	Close() error
	// Classify names the constraint an error violated, if any, or says
	// the database is unavailable (the one place each dialect decides
	// which of its errors are an outage).
	Classify(err error) ErrorKind
}

// ErrorKind is the class of a database error that the store maps to a
// sentinel.
type ErrorKind int

const (
	ErrOther       ErrorKind = iota
	ErrUnique                // a unique or primary key: store.ErrConflict
	ErrForeignKey            // a referenced row is missing: store.ErrNotFound
	ErrRetry                 // a deadlock or serialization failure: run the transaction again
	ErrSwapLost              // a compare-and-swap made to fail when it moves nothing (mustMove) moved nothing
	ErrUnavailable           // the database is unreachable or failing for a while: store.ErrUnavailable
)

// Tx is an open transaction.
type Tx interface {
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	// Batch runs stmts in order, in one round trip where the driver can
	// (PostgreSQL: one pgx batch, with BEGIN when the transaction has not
	// begun yet; SQLite: one after another), and returns what each did:
	// the rows it affected, or for a statement with Dest 1 when it returned
	// a row (scanned into Dest) and 0 when it returned none, or for one
	// with Each the number of rows Each read. It stops at the
	// first statement that fails and returns its error with the results of
	// those before it, so stmts[len(n)] is the one that failed, and the
	// transaction must roll back as after a failed Exec. (pgx prepares a
	// batch's statements before running any: one that cannot be prepared
	// fails the batch at its first statement.)
	//
	// On an Autocommitter's Tx the statements commit one by one on SQLite
	// and together on PostgreSQL (a batch is one implicit transaction).
	Batch(ctx context.Context, stmts []Stmt) (n []int64, err error)
	// Raw is the driver's transaction (pgx.Tx or *sql.Tx), handed to
	// jobs.Inserter so jobs commit with the rows.
	Raw() jobs.Tx
}

// Stmt is one statement of a Batch. With Dest it is a query (INSERT ...
// RETURNING, SELECT) whose first row is scanned into Dest; with Each, a
// query whose every row Each reads (an error from Each fails the
// statement).
type Stmt struct {
	SQL  string
	Args []any
	Dest []any
	Each func(Rows) error
}

// EachRow passes every row of rows to each and counts them; it closes
// rows (a driver's Batch reads a Stmt with Each through it).
func EachRow(rows Rows, each func(Rows) error) (int64, error) {
	defer rows.Close()
	var n int64
	for rows.Next() {
		if err := each(rows); err != nil {
			return n, err
		}
		n++
	}
	rows.Close()
	return n, rows.Err()
}

// Rows is a result set; Close must be called before the next statement.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Dialect is everything that differs between PostgreSQL and SQLite SQL.
// Queries are written once with tokens that the dialect expands:
//
//	{now}            the database clock, in the column encoding
//	{now+$N}         the database clock plus $N microseconds
//	{json:COL:KEY}   the text of top-level key KEY of JSON column COL
//	{forupdate}      a row lock on the selected rows (nothing on SQLite,
//	                 whose writers are serialized by BEGIN IMMEDIATE)
//	{forshare}       a shared row lock: the rows cannot change until the
//	                 transaction ends (nothing on SQLite, as {forupdate})
//	{inlist} SUBQUERY {endlist}
//	                 "IN (SUBQUERY)" as an index lookup of each value the
//	                 subquery returns, whatever the planner's statistics:
//	                 PostgreSQL's "= ANY (ARRAY(SUBQUERY))" (an InitPlan
//	                 run first; a semi-join leaves the planner free to
//	                 scan the outer table, which it does on tables never
//	                 analyzed), SQLite's IN
//	{pin:COL:$N}     COL = $N as where.pin writes it: PostgreSQL's range
//	                 COL >= $N AND COL <= $N, SQLite's equality (SQLite
//	                 orders by an equal column's index without it, and
//	                 would not seek a range's next index column)
type Dialect struct {
	Name      string
	now       string
	nowPlus   func(param string) string
	jsonText  func(col, key string) string
	forUpdate string
	forShare  string
	// customPlans makes the rest of a transaction plan each statement for
	// its arguments and the tables as they are ("" where no plan is kept).
	customPlans string
	inList      [2]string // what {inlist} and {endlist} expand to
	pin         func(col, param string) string
	positional  bool // rewrite $N to ?N (SQLite binds "$1" by name)
	encodeTime  func(time.Time) any
	// announce announces a verdict on subject $1 at its transaction's
	// commit ("" where the database cannot: the frontend polls, Settled).
	announce string
	// migrationLock serializes concurrent migrators ("" when BEGIN
	// IMMEDIATE already does).
	migrationLock    string
	migrationsTable  string
	migrationsExists string

	cache sync.Map // raw query → expanded query
}

// Postgres is the PostgreSQL dialect: timestamptz columns and jsonb job args.
var Postgres = &Dialect{
	Name:      "postgres",
	now:       "now()",
	nowPlus:   func(p string) string { return "(now() + " + p + "::bigint * interval '1 microsecond')" },
	jsonText:  func(col, key string) string { return col + "->>'" + key + "'" },
	forUpdate: " FOR UPDATE",
	forShare:  " FOR SHARE",
	// A connection's prepared statement switches to a generic plan after
	// five runs and keeps it: one made while the tables were small scans
	// them (TestPlansMadeSmall).
	customPlans: "SET LOCAL plan_cache_mode = force_custom_plan",
	inList:      [2]string{"= ANY (ARRAY(", "))"},
	pin:         func(col, p string) string { return col + " >= " + p + " AND " + col + " <= " + p },
	encodeTime:  func(t time.Time) any { return t.UTC() },
	announce:    `SELECT pg_notify('` + VerdictChannel + `', $1)`,
	// Any constant works; it only has to be the same for every migrator.
	migrationLock: "SELECT pg_advisory_xact_lock(7261001)",
	migrationsTable: `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL DEFAULT '',
    applied_at timestamptz NOT NULL DEFAULT now()
)`,
	migrationsExists: `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename = 'schema_migrations'`,
}

const sqliteNow = "(CAST(unixepoch('subsec') * 1000000 AS INTEGER))"

// SQLite is the SQLite dialect: times are integer microseconds since the
// epoch and River's job args are JSONB blobs.
var SQLite = &Dialect{
	Name:       "sqlite",
	now:        sqliteNow,
	nowPlus:    func(p string) string { return "(" + sqliteNow + " + " + p + ")" },
	jsonText:   func(col, key string) string { return "json_extract(" + col + ", '$." + key + "')" },
	forUpdate:  "",
	forShare:   "",
	inList:     [2]string{"IN (", ")"},
	pin:        func(col, p string) string { return col + " = " + p },
	positional: true,
	encodeTime: func(t time.Time) any { return t.UnixMicro() },
	migrationsTable: `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL DEFAULT '',
    applied_at integer NOT NULL DEFAULT (` + sqliteNow + `)
)`,
	migrationsExists: `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`,
}

var (
	tokenRE       = regexp.MustCompile(`\{(now\+\$\d+|now|forupdate|forshare|inlist|endlist|pin:[a-z_]+:\$\d+|json:[a-z_.]+:[a-z_]+)\}`)
	placeholderRE = regexp.MustCompile(`\$(\d+)`)
)

// SQL expands a query's tokens for the dialect. Expansions are cached: the
// queries are constants, or built by where from a few fixed conditions, so
// the cache is bounded by the source.
func (d *Dialect) SQL(q string) string {
	if v, ok := d.cache.Load(q); ok {
		return v.(string)
	}
	out := tokenRE.ReplaceAllStringFunc(q, func(tok string) string {
		tok = tok[1 : len(tok)-1]
		switch {
		case tok == "now":
			return d.now
		case tok == "forupdate":
			return d.forUpdate
		case tok == "forshare":
			return d.forShare
		case tok == "inlist":
			return d.inList[0]
		case tok == "endlist":
			return d.inList[1]
		case len(tok) > 4 && tok[:4] == "now+":
			return d.nowPlus(tok[4:])
		case strings.HasPrefix(tok, "pin:"):
			col, param, _ := strings.Cut(tok[len("pin:"):], ":")
			return d.pin(col, param)
		default: // json:COL:KEY
			var col, key string
			rest := tok[len("json:"):]
			for i := len(rest) - 1; i >= 0; i-- {
				if rest[i] == ':' {
					col, key = rest[:i], rest[i+1:]
					break
				}
			}
			return d.jsonText(col, key)
		}
	})
	if d.positional {
		out = placeholderRE.ReplaceAllString(out, "?${1}")
	}
	d.cache.Store(q, out)
	return out
}

// T encodes a time for a query argument.
func (d *Dialect) T(t time.Time) any { return d.encodeTime(t) }

// TP encodes an optional time (nil is NULL).
func (d *Dialect) TP(t *time.Time) any {
	if t == nil {
		return nil
	}
	return d.encodeTime(*t)
}

// timeScan reads a time column of either encoding: time.Time (PostgreSQL)
// or integer microseconds (SQLite).
type timeScan struct {
	t    *time.Time
	null **time.Time
}

func (s *timeScan) Scan(src any) error {
	var t time.Time
	switch v := src.(type) {
	case nil:
		if s.null != nil {
			*s.null = nil
			return nil
		}
		return errors.New("scanning time: unexpected NULL")
	case time.Time:
		t = v.UTC()
	case int64:
		t = time.UnixMicro(v).UTC()
	case float64:
		t = time.UnixMicro(int64(v)).UTC()
	default:
		return fmt.Errorf("scanning time: unsupported type %T", src)
	}
	if s.null != nil {
		*s.null = &t
	} else {
		*s.t = t
	}
	return nil
}

func ts(p *time.Time) any      { return &timeScan{t: p} }
func tsNull(p **time.Time) any { return &timeScan{null: p} }

// randomID is a record ID: 16 bytes of crypto/rand, base64url.
//
// It never starts with '-': operators paste IDs into `hallmark accounts
// show ID`, where a leading '-' reads as a flag (one ID in 64 did). Drawing
// again costs under a bit of the 128.
func randomID() string {
	for {
		if id := randomString(16); id[0] != '-' {
			return id
		}
	}
}

// randomToken is a challenge token: RFC 8555 §8.1 asks for at least 128 bits
// of entropy; this has 256.
func randomToken() string { return randomString(32) }

func randomString(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand failed: " + err.Error()) // unreachable on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
