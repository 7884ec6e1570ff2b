// Package sqlite is the store on SQLite through modernc.org/sqlite
// (database/sql, no cgo): it opens the file the way Hallmark needs it (WAL,
// busy_timeout, foreign keys, BEGIN IMMEDIATE for every transaction, one
// open connection for the store and the jobs it inserts, and a second in a
// started worker for River's own work: OpenJobRunner), adapts
// *sql.DB to sqlstore's executor, commits the store's write transactions
// that queue together as one (group.go) and classifies SQLite constraint
// errors.
// Its database/sql driver (driver.go) is modernc's with each connection's
// statements kept prepared, River's included.
// The store's logic lives in sqlstore; this package must never grow its own
// copy of it, and must never run a statement on the *sql.DB while one of the
// store's transactions is open (with one connection that deadlocks).
package sqlite
