package sqlite

import (
	"database/sql"
	"fmt"
	"runtime"
	"strings"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/sqlstore"
)

// Readers. A process's store writes on one connection (Open's), which is
// what makes BEGIN IMMEDIATE order its writers; its reads outside a
// transaction used to queue for that same connection, behind whole groups
// of write transactions and their syncs (group.go). In WAL mode a reader
// needs no lock a writer holds, so the store's autocommitted SELECTs run
// on a pool of read-only connections instead, each seeing every commit
// made before it starts, on this connection or any other.
//
// At 32 concurrent issuances the worker's store connection had 2.5-3.7
// callers waiting for it at any time, ~10 ms each (database/sql's
// WaitDuration, logged every 2 s by a throw-away build): its validations
// read their challenge and its issuances their order behind the verdicts
// and certificates being written. With the readers: 131-140 -> 159-162
// certificates/s, CPU 7.9-8.6 -> 6.9-7.1 ms a certificate
// (docs/performance.md, round 25).

// maxReaders bounds the read-only pool: reads are CPU work, so a few
// connections past the CPUs only cover the moments one waits on the disk.
func maxReaders() int { return max(4, runtime.NumCPU()) }

// OpenReaders opens the read-only pool on the database at path, which
// Open must have opened (and so created and put in WAL mode) first.
// query_only makes a write sent here fail rather than take the write lock
// outside the store's ordering (readOnly routes only SELECTs here).
func OpenReaders(path string) (*sql.DB, error) {
	db, err := openPool(dsn(path, synchronous)+"&_pragma=query_only(1)", maxReaders())
	if err != nil {
		return nil, fmt.Errorf("opening SQLite database %s to read: %w", path, err)
	}
	return db, nil
}

// NewWithReaders is New with the store's autocommitted SELECTs on readers
// (OpenReaders on the same file). The store closes both.
func NewWithReaders(db, readers *sql.DB, ins jobs.Inserter) store.Store {
	return sqlstore.New(conn{db: db, rd: readers, g: newGroup(db)}, sqlstore.SQLite, ins)
}

// readOnly reports whether q is a statement the read-only pool may run:
// one that starts with SELECT. In SQLite a SELECT writes nothing (a CTE
// cannot hold a write, but a WITH statement can end in one, so those stay
// on the writer, as does anything else).
func readOnly(q string) bool {
	q = strings.TrimLeft(q, " \t\r\n")
	return len(q) >= 6 && strings.EqualFold(q[:6], "SELECT")
}
