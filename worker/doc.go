// Package worker runs Hallmark's queued work: it owns the handler for each
// job kind (challenge_validate, signer_issue, crl_generate, housekeeping)
// and the River runner that executes them. It is the only place where
// validation (worker/validate) and signing (signer/) meet the store.
//
// It must never serve the public API. Every handler records its verdict and
// completes its job in one store transaction (jobs.Done); it returns
// jobs.CouldNotRun only when the attempt could not happen (the database is
// unreachable, this worker does not mount the profile), so a verdict, once
// reached, is terminal.
package worker
