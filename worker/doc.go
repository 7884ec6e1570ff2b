// Package worker runs Hallmark's queued work: it owns the handler for each
// job kind (challenge_validate, signer_issue, crl_generate, housekeeping)
// and the River runner that executes them. It is the only place where
// validation (worker/validate) and signing (signer/) meet the store.
//
// It must never serve the public API. Every handler records its verdict in
// one store transaction and returns nil; River marks the job completed after
// that commit. A worker that dies in between leaves the job running: River
// rescues it after worker.rescue_after_ms and runs it again, and the handler,
// which checks its subject first, finds it no longer processing and returns
// nil. A handler returns jobs.CouldNotRun only when the attempt could not
// happen (the database is unreachable, this worker does not mount the
// profile), so a verdict, once reached, is terminal.
package worker
