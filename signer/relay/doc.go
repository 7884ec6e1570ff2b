// Package relay is the signing backend that obtains certificates from an
// upstream ACME CA: the worker holds an account there (its key in a PEM
// file) and, for each order, places an upstream order for the same
// identifiers, finalizes it with the subscriber's CSR and returns the
// upstream's chain. Revocation goes to the upstream's revokeCert.
//
// Hallmark has already validated the subscriber; a pending upstream
// authorization is won as challenge_strategy says (solve.go): "bypass"
// accepts the configured challenge and waits (an upstream that
// pre-authorises the account), "dns01" publishes the TXT record by TSIG-signed
// RFC 2136 UPDATE (dns01.go), "http01" stores the answer in the store
// (Tokens) for the frontend's public http listener to serve.
//
// Each upstream order is journaled in the store (Journal) under its
// Hallmark order before it is finalized, so that a retry on any worker
// with the same account key resumes it rather than place a second one.
//
// It holds no issuing key, and uses golang.org/x/crypto/acme as its client.
package relay
