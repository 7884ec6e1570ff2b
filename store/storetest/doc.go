// Package storetest is the one contract suite for store.Store: every
// dialect's tests call Run, so PostgreSQL and SQLite are held to the same
// behaviour (status moves, compare-and-swap claims, claim-and-enqueue
// atomicity, sentinel errors, leases, migrations). It drives real databases
// and River's real job table; it must never mock the database.
package storetest
