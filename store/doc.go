// Package store owns Hallmark's records: accounts, orders, authorizations,
// challenges, certificates, revocations, CRLs, the nonces' consumed set,
// leases and audit events. Store is the one interface; postgres/ (pgx/v5)
// and sqlite/ (modernc.org/sqlite) implement it, and storetest/ is the
// contract suite both must pass.
//
// Methods are coarse and transactional: no transaction escapes to protocol or
// worker. An operation that needs queued work inserts its job inside its own
// transaction (ChallengeClaim inserts challenge_validate), and a verdict
// completes its job inside the verdict's transaction (jobs.Done). Times that
// decide leases and expiry come from the database's clock.
package store
