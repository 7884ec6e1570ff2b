// Package acme is the leaf vocabulary of Hallmark: identifiers, statuses,
// challenge types and RFC 7807 problem documents with the RFC 8555 error
// types. It imports only the standard library, so every other package (store,
// jobs, worker, protocol) can speak it without pulling in anything else.
package acme
