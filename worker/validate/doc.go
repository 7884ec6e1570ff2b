// Package validate proves control of an identifier for the worker: the
// http-01 (RFC 8555 §8.3), dns-01 (RFC 8555 §8.4) and tls-alpn-01 (RFC 8737)
// challenges, IP identifiers (RFC 8738) and the CAA check (RFC 8659, with the
// RFC 8657 accounturi and validationmethods parameters).
//
// Everything it reads comes from machines an ACME client controls: HTTP
// bodies, redirects, TLS certificates and DNS answers. So every step is
// bounded (one deadline for the whole attempt, at most 10 redirects, a small
// body, a short CNAME chain, bounded DNS messages), names are resolved only
// through the configured resolvers (never the system resolver, never an
// environment proxy), every address is checked against one dial policy
// (dialpolicy.go) before anything connects to it, and every problem it
// reports says what was tried so the client's operator can act on it.
//
// It must never import signer/ (no key material next to untrusted input) or
// store/ (it decides; the worker records the verdict). It depends on
// protocol/acme for vocabulary and github.com/miekg/dns for DNS.
package validate
