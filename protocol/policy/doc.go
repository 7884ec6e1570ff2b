// Package policy owns which identifiers Hallmark will certify: their syntax
// (RFC 8555 §7.1.4, RFC 8738, RFC 1035 LDH names), the requesting profile's
// rules (identifier types, wildcards) and the operator's allow and deny
// lists. Check both validates and normalises, so everything after it (orders,
// authorizations, CSR matching, validation) sees one spelling of each name.
//
// It decides from its input alone: it never resolves a name, dials a host or
// reads the store.
package policy
