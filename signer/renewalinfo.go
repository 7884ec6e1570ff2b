package signer

import (
	"errors"
	"time"
)

// ErrNoRenewalInfo is a backend's answer when it has no renewal
// information to give: a relay whose upstream's directory offers no
// renewalInfo (RFC 9773 §3). Nothing is recorded, and Hallmark's own
// window stands.
var ErrNoRenewalInfo = errors.New("the backend offers no renewal information")

// RenewalInfo is what a backend's upstream CA says of the renewal of one
// certificate it issued (RFC 9773 §4.2).
type RenewalInfo struct {
	// Start and End are the suggestedWindow; both zero when the upstream
	// knows nothing of the certificate (404) or answered a document that
	// is no RenewalInfo.
	Start, End time.Time
	// ExplanationURL is the upstream's, as it gave it.
	ExplanationURL string
	// RetryAfter is how long to wait before asking again (§4.3): the
	// upstream's Retry-After, or a default when it sent none.
	RetryAfter time.Duration
}
