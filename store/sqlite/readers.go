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
// what makes BEGIN IMMEDIATE order its writers. Its reads outside a
// transaction would queue for that connection behind whole groups of write
// transactions and their syncs (group.go): at 32 concurrent issuances a
// job's first read (its challenge, its order) waited ~10 ms there. In WAL
// mode a reader needs no lock a writer holds, so the store's autocommitted
// SELECTs run on a pool of read-only connections instead, each seeing every
// commit made before it starts, on this connection or any other.

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
