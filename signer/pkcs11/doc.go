// Package pkcs11 is Hallmark's one home of crypto11 (and so of cgo and the
// PKCS#11 C API): it turns a key on a token into the crypto.Signer that
// signer.NewIssuer takes, keeps the session pool sized for the worker's
// concurrency, and survives a token that goes away.
//
// A failing token operation (module error, token removed, session or login
// lost) is reported wrapped in signer.ErrUnavailable, so the worker retries
// the job instead of failing the order; the next operation, or Ready, opens
// the module again. Key material never leaves the token, and the PIN is
// never logged or put in an error.
//
// Only cmd/hallmark-worker may import this package (tests/layering enforces
// it): the frontend and the CLI are built with CGO_ENABLED=0.
package pkcs11
