// Package relay is the signing backend that obtains certificates from an
// upstream ACME CA: the worker holds an account there (its key in a PEM
// file) and, for each order, places an upstream order for the same
// identifiers, finalizes it with the subscriber's CSR and returns the
// upstream's chain. Revocation goes to the upstream's revokeCert.
//
// The upstream must grant its authorizations without the relay answering a
// challenge (an account it pre-authorises, or a CA that trusts the relay):
// Hallmark has already validated the subscriber. If an upstream
// authorization is pending, the relay accepts its configured challenge type
// and waits for the upstream's verdict.
//
// Each upstream order is journaled in the store (Journal) under its
// Hallmark order before it is finalized, so that a retry on any worker
// with the same account key resumes it rather than place a second one.
//
// It holds no issuing key, and uses golang.org/x/crypto/acme as its client.
package relay
