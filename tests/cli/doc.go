// Package cli tests the operator CLI `hallmark` as operators and scripts use
// it: the built binary against a real store (SQLite and PostgreSQL), checking
// its output, its --json and its exit codes.
package cli
