// Package csr owns the checks on a finalize request's certificate signing
// request (RFC 8555 §7.4): that it is well signed, that its key is one the
// profile allows, that it names exactly the order's identifiers and nothing
// else, and that it asks for no extension that could smuggle in a name or CA
// powers.
//
// It decides; it never signs, and it never copies anything from the CSR into
// a certificate: the signer builds certificates from the order and the
// profile, using only the CSR's public key.
package csr
