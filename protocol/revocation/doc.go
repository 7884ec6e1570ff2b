// Package revocation is Hallmark's one revocation code path, shared by the
// ACME revokeCert handler, the `hallmark revoke` CLI and the admin panel: the
// RFC 5280 reason codes a revocation may carry, the choice between recording
// the revocation here (local and pkcs11 backends: Hallmark is the CA, the
// worker signs the next CRL) and asking the issuing backend (relay and custom:
// a signer_revoke job, optionally waited on), and the audit event saying who
// revoked what, when and why, written in the same store transaction.
//
// It decides nothing about who may revoke: the caller authorises (RFC 8555
// §7.6 for the API, operator credentials for the CLI and panel) and names the
// actor. It must never build a signer or talk to a backend itself: work that
// needs a key is queued for a worker.
package revocation
