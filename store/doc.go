// Package store owns Hallmark's records: accounts, orders, authorizations,
// challenges, certificates, revocations, CRLs, the nonces' consumed set,
// leases and audit events. Store is the one interface; postgres/ (pgx/v5)
// and sqlite/ (modernc.org/sqlite) implement it, and storetest/ is the
// contract suite both must pass.
//
// Methods are coarse and transactional: no transaction escapes to protocol or
// worker. An operation that needs queued work inserts its job inside its own
// transaction (ChallengeClaim inserts challenge_validate). A verdict
// (ChallengeVerdict, OrderIssued, OrderFail, RevokeRecorded) commits in one
// transaction and never touches its job: River marks the job completed after
// the handler returns. A job run again after its verdict committed (its
// worker died before River marked it) finds its subject no longer
// processing, and a second verdict is refused with ErrConflict. Times that
// decide leases and expiry come from the database's clock.
package store
