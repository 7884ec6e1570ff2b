// Package sqlstore is the one implementation of store.Store, written once
// against a tiny executor (Conn, Tx, Rows) that store/postgres adapts to pgx
// and store/sqlite adapts to database/sql. The per-dialect differences —
// the clock expression, JSON extraction from River's job args, time
// encoding, placeholders, row locks — live in the Dialect table, so the
// status moves of RFC 8555 §7.1.6 are written exactly once. It also runs the
// embedded migrations.
//
// Every operation runs inside one transaction and issues every statement on
// that transaction, including job inserts (jobs.Inserter): on SQLite there is
// a single connection, and a second query outside the transaction would
// deadlock. Verdicts never touch their job; River completes it after the
// handler returns. It must never read time.Now for a decision about leases
// or expiry: the database clock decides.
package sqlstore
