// Package jobs is Hallmark's thin layer over River (riverqueue/river): typed
// args per job kind, the handler registry (one handler per kind), the retry
// policy, abandon and recover, periodic jobs, and building the River client
// for PostgreSQL (riverpgxv5) or SQLite (riversqlite).
//
// It knows nothing of ACME records: the store calls it to insert and
// complete jobs inside its own transactions, and the worker registers the
// handlers. It must never import store, protocol or signer.
package jobs
