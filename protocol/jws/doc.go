// Package jws owns the parsing and verification of the JSON Web Signatures
// that authenticate every ACME POST (RFC 8555 §6.2, §6.3, §7.3.5). It is the
// one home of go-jose in Hallmark.
//
// It checks the shape of a request (flattened JSON serialisation, one
// signature, protected header only, an allowed algorithm, exactly one of
// "jwk" and "kid", "url" and "nonce" present) and verifies signatures. It
// never looks up accounts, checks a nonce's value or compares the "url" with
// the request: those are the caller's, which holds the store and the request.
// Every error it returns is an *acme.Error with the problem type RFC 8555
// names for the failure.
package jws
