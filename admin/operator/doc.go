// Package operator holds the operator actions other than revocation that the
// `hallmark` CLI and the admin panel share — deactivating an account,
// retrying a job, abandoning a job and its subject — each recording an audit
// event saying who did what and when. Revocation is package
// protocol/revocation, shared with the ACME API.
//
// It must never build a signer or do a job's work itself: retrying hands a
// job back to the workers, abandoning records a failure so no client polls
// forever.
package operator
