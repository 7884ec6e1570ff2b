// Package protocol is Hallmark's ACME HTTP frontend (RFC 8555): one file per
// resource (directory, nonce, account, order, authz, challenge, finalize,
// cert, revoke, crl) and one problem renderer (problem.go). server.go builds
// the Server; routes.go is the router, instrument.go the metrics, admission
// limit and per-request deadline, verify.go the checks every POST goes
// through, and wire.go how payloads are read and resources written.
//
// It owns the request path and nothing slow or privileged: a request parses
// and checks, writes rows in one store transaction and, where work is needed,
// lets the store queue it (ChallengeClaim, OrderFinalizeBegin, Revoke,
// RevokeQueue insert the jobs in the same transaction). It must never dial a
// host a client named, never sign, and never import signer/ or a PKCS#11
// library; tests/layering enforces that for the binary that serves it.
package protocol
