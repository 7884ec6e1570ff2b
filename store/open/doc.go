// Package open turns a database URL ("postgres://..." or "sqlite:<path>")
// into Hallmark's store and job queue sharing one handle, and runs
// migrations (Hallmark's and River's). It is what the binaries call; it owns
// no SQL of its own and must never build a signer or start workers.
package open
