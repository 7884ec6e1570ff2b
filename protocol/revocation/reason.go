package revocation

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// Reason is an RFC 5280 §5.3.1 CRLReason code.
type Reason int

// The RFC 5280 §5.3.1 reason codes (7 is unused).
const (
	Unspecified          Reason = 0
	KeyCompromise        Reason = 1
	CACompromise         Reason = 2
	AffiliationChanged   Reason = 3
	Superseded           Reason = 4
	CessationOfOperation Reason = 5
	CertificateHold      Reason = 6
	RemoveFromCRL        Reason = 8
	PrivilegeWithdrawn   Reason = 9
	AACompromise         Reason = 10
)

var reasonNames = map[Reason]string{
	Unspecified:          "unspecified",
	KeyCompromise:        "keyCompromise",
	CACompromise:         "cACompromise",
	AffiliationChanged:   "affiliationChanged",
	Superseded:           "superseded",
	CessationOfOperation: "cessationOfOperation",
	CertificateHold:      "certificateHold",
	RemoveFromCRL:        "removeFromCRL",
	PrivilegeWithdrawn:   "privilegeWithdrawn",
	AACompromise:         "aACompromise",
}

// allowed are the reasons an end-entity revocation may carry, whoever asks:
// unspecified, keyCompromise, affiliationChanged, superseded,
// cessationOfOperation, privilegeWithdrawn. Never cACompromise and
// aACompromise (they are about a CA, not a subscriber), certificateHold (the
// Baseline Requirements forbid it) or removeFromCRL (delta CRLs only).
var allowed = []Reason{Unspecified, KeyCompromise, AffiliationChanged, Superseded, CessationOfOperation, PrivilegeWithdrawn}

// Allowed lists the reasons Revoke accepts, in code order.
func Allowed() []Reason { return append([]Reason(nil), allowed...) }

// String is the RFC 5280 name, or "reason(N)" for a code it has none for.
func (r Reason) String() string {
	if n, ok := reasonNames[r]; ok {
		return n
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// Valid reports whether Revoke accepts r.
func (r Reason) Valid() bool {
	for _, a := range allowed {
		if a == r {
			return true
		}
	}
	return false
}

// Check is nil for an accepted reason and otherwise a badRevocationReason
// error naming the accepted ones (RFC 8555 §7.6).
func (r Reason) Check() error {
	if r.Valid() {
		return nil
	}
	return acme.New(acme.ProblemBadRevocationReason, "revocation reason %d is not allowed; use one of %s", int(r), allowedList())
}

func allowedList() string {
	parts := make([]string, len(allowed))
	for i, a := range allowed {
		parts[i] = fmt.Sprintf("%d (%s)", int(a), a)
	}
	return strings.Join(parts, ", ")
}

// ParseReason reads a reason as its code ("4") or its RFC 5280 name in any
// case, with or without dashes or underscores ("superseded",
// "key-compromise", "KEY_COMPROMISE"). It accepts only the reasons Revoke
// accepts.
func ParseReason(s string) (Reason, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.Atoi(s); err == nil {
		r := Reason(n)
		return r, r.Check()
	}
	key := strings.ToLower(strings.NewReplacer("-", "", "_", "", " ", "").Replace(s))
	for r, name := range reasonNames {
		if strings.ToLower(name) == key {
			return r, r.Check()
		}
	}
	return 0, acme.New(acme.ProblemBadRevocationReason, "%q is not a revocation reason; use one of %s", s, allowedList())
}
