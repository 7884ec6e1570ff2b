package acme

import "strings"

// Status is the status of an ACME object (RFC 8555 §7.1.6).
type Status string

const (
	StatusPending     Status = "pending"
	StatusReady       Status = "ready"
	StatusProcessing  Status = "processing"
	StatusValid       Status = "valid"
	StatusInvalid     Status = "invalid"
	StatusExpired     Status = "expired"
	StatusDeactivated Status = "deactivated"
	StatusRevoked     Status = "revoked"
)

// IdentifierType is the type of an identifier: "dns" (RFC 8555) or "ip" (RFC 8738).
type IdentifierType string

const (
	IdentifierDNS IdentifierType = "dns"
	IdentifierIP  IdentifierType = "ip"
)

// Identifier is an ACME identifier object (RFC 8555 §7.1.4).
type Identifier struct {
	Type  IdentifierType `json:"type"`
	Value string         `json:"value"`
}

// String renders the identifier as "type:value" for logs and errors.
func (i Identifier) String() string { return string(i.Type) + ":" + i.Value }

// IsWildcard reports whether a dns identifier is a wildcard ("*.example.com").
func (i Identifier) IsWildcard() bool {
	return i.Type == IdentifierDNS && strings.HasPrefix(i.Value, "*.")
}

// Base is the identifier an authorization is for: a wildcard order's
// authorization names the base domain without "*." (RFC 8555 §7.1.4).
func (i Identifier) Base() Identifier {
	if i.IsWildcard() {
		return Identifier{Type: i.Type, Value: strings.TrimPrefix(i.Value, "*.")}
	}
	return i
}

// ChallengeType names a validation method.
type ChallengeType string

const (
	ChallengeHTTP01    ChallengeType = "http-01"
	ChallengeDNS01     ChallengeType = "dns-01"
	ChallengeTLSALPN01 ChallengeType = "tls-alpn-01"
	// ChallengeDNSAccount01 is dns-01 at an account-scoped name
	// (draft-ietf-acme-dns-account-label).
	ChallengeDNSAccount01 ChallengeType = "dns-account-01"
	// ChallengeDNSPersist01 is a standing TXT record naming the CA and the
	// account (draft-ietf-acme-dns-persist-01).
	ChallengeDNSPersist01 ChallengeType = "dns-persist-01"
)

// AccountHashPath follows the base URL in the prefix of dns-persist-01's
// hashed account URIs (draft-ietf-acme-dns-persist-02 §4.1), which the
// directory advertises and the worker recomputes; nothing is served there.
const AccountHashPath = "/acme/account-hash/"

// ByDNS reports whether t proves control of a name through its DNS zone:
// the only methods that may validate a wildcard (RFC 8555 §7.1.3).
func (t ChallengeType) ByDNS() bool {
	return t == ChallengeDNS01 || t == ChallengeDNSAccount01 || t == ChallengeDNSPersist01
}

// ForIP reports whether t can validate an IP address: http-01 and
// tls-alpn-01 (RFC 8738 §7), and dns-persist-01 through the reverse zone
// (CA/B Forum BR §3.2.2.5.8).
func (t ChallengeType) ForIP() bool {
	return t == ChallengeHTTP01 || t == ChallengeTLSALPN01 || t == ChallengeDNSPersist01
}
