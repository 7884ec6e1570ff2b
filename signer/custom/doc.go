// Package custom is the signing backend that runs an operator's executables:
// one hook issues a certificate for an order's CSR, another revokes one.
// Each run gets one JSON request on stdin and answers one JSON response on
// stdout (docs/backends.md has the contract), within a timeout; its stderr
// goes to the worker log and, when the run fails, into the job's attempt log.
//
// It never trusts a hook's certificate blindly: the leaf must carry the
// CSR's public key and exactly the order's identifiers. It holds no key and
// never imports a PKCS#11 library.
package custom
