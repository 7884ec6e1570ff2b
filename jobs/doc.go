// Package jobs is Hallmark's thin layer over River (riverqueue/river): typed
// args per job kind, the handler registry (one handler per kind), the retry
// policy, abandon and recover, periodic jobs, and building the River client
// for PostgreSQL (riverpgxv5) or SQLite (riversqlite).
//
// It knows nothing of ACME records: the store calls it to insert jobs inside
// its own transactions, and the worker registers the handlers. It must never
// import store, protocol (beyond the leaf vocabulary protocol/acme, for the
// abandon problem) or signer.
//
// The rules it enforces:
//   - A job is inserted in the transaction of the claim that needs it
//     (Inserter.InsertTx). A handler commits its verdict in one store
//     transaction and returns nil; River marks the job completed after that
//     commit, batched with others. A job whose worker died in between stays
//     running until River rescues it after RescueAfter, so a handler returns
//     nil at once on a subject that is no longer processing (every handler
//     in worker/ does).
//   - Retry only when the attempt could not happen: a handler returns
//     CouldNotRun(err) and River retries with exponential backoff and
//     jitter. Any other error, or a panic, means the handler is broken: the
//     subject is abandoned with serverInternal and the job cancelled. Running
//     out of attempts abandons too. Recover re-queues whatever is still left.
//   - A job that must wait its turn returns Snooze(d): River runs it again
//     after d and counts no attempt, so no number of snoozes abandons its
//     subject (the worker snoozes a validation whose account holds its
//     share of the validation slots).
//   - A worker killed mid-job loses it to River's rescuer once it has run
//     longer than RescueAfter. The rescuer runs on the elected leader every
//     30 s (River's fixed interval; a new leader runs it at once, after the
//     dead leader's ~15 s lease expires) and the scheduler makes the job
//     available within 5 s, so a rescue takes RescueAfter plus up to ~35 s.
//   - Fetch timing is set explicitly: a 2 ms cooldown (River's 100 ms caps
//     throughput near 1,000 jobs/s); insert notifications start jobs, and
//     the poll that backs them up runs every 250 ms (it is most of an idle
//     worker's cost). On SQLite a notification is a row in an outbox
//     table: a worker checks whether a notification has committed (the
//     outbox's highest id) as soon as the database's WAL file is written
//     (inotify, sqlite_walwatch.go; a 50 ms poll backs it up, or a 5 ms
//     poll where the file cannot be watched) and reads the outbox only
//     then.
//
// On SQLite every process holds one connection (riversqlite's requirement),
// so whoever holds a transaction on the handle (a store method inserting a
// job with InsertTx) does all its database work through that transaction; a
// second query on the handle meanwhile would wait forever.
package jobs
