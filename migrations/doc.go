// Package migrations holds Hallmark's schema as numbered, forward-only SQL
// files, one set per dialect (postgres/, sqlite/), embedded in the binary.
// Both sets carry the same versions: a change to the schema is one new
// NNNN_name.up.sql in each directory. Files are never edited once released
// and there are no down migrations; the runner in store/sqlstore refuses a
// database whose version this binary does not know.
//
// It owns only the SQL text and its ordering; it must never open a database.
package migrations
