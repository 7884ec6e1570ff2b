// Package signer owns issuance with a crypto.Signer: building a certificate
// from a profile and an order's identifiers, linting it with zlint before the
// real key signs (Boulder's lint-before-sign), signing CRLs, and the local
// development CA (InitLocal, LoadLocal).
//
// The whole key seam is crypto.Signer: a key file, a PKCS#11 token (a later
// signer/pkcs11 built on crypto11) or anything else that signs becomes an
// Issuer by handing its certificate, chain and crypto.Signer to NewIssuer.
//
// Only hallmark-worker imports this package (tests/layering enforces it): the
// internet-facing frontend and the CLI never hold key material. It must never
// import store or protocol beyond protocol/acme (errors) and protocol/profile
// (profile.Profile), and it never reads anything from a CSR but the public key:
// the order's identifiers are the only source of names.
package signer
