// Package access owns who may ask the CA: the client access policy of
// [access]. Named checks look at the client (its address, behind trusted
// proxies; its reverse DNS), at the account (its external account binding),
// at the identifiers of an order, or ask an operator's hook or an IPAM;
// ordered rules combine them with and, or and not, and the first rule that
// matches decides. A check whose source cannot answer says "unknown", and a
// rule that depends on it decides nothing: the request is answered 503 with
// Retry-After, never refused and never let through.
//
// The frontend evaluates the policy on every ACME POST in stages, as what it
// learns of the request grows (Eval): before any work with the client's
// address, after the signature with the account, and for newOrder and
// newAuthz with the identifiers. `hallmark policy explain` runs the same
// stages on the operator's input.
package access
