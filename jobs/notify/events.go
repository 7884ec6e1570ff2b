// Package notify owns [notify]: the events Hallmark reports, the
// destinations they go to, and the message templates, with their checks.
// It links nothing of the module, so every binary that writes an event
// (the frontend, the worker, the CLI) can route it.
package notify

import (
	"slices"
	"time"
)

// The events, as configuration names them.
const (
	CertificateIssued   = "certificate_issued"
	CertificateRevoked  = "certificate_revoked"
	CertificateExpiring = "certificate_expiring"
	ChallengeFailed     = "challenge_failed"
	AccountCreated      = "account_created"
	AccountDeactivated  = "account_deactivated"
)

// Events are every event, sorted.
var Events = []string{AccountCreated, AccountDeactivated, CertificateExpiring, CertificateIssued,
	CertificateRevoked, ChallengeFailed}

// Known reports whether event is one of Events.
func Known(event string) bool { return slices.Contains(Events, event) }

// Message is what a template sees of one event for one destination.
type Message struct {
	Event       string    `json:"event"`
	Destination string    `json:"destination"`
	Key         string    `json:"key"`     // the idempotency key: the same for every delivery of this event
	Subject     string    `json:"subject"` // a serial, an account id or a challenge id
	Account     string    `json:"account,omitempty"`
	Actor       string    `json:"actor,omitempty"`
	Detail      string    `json:"detail,omitempty"`
	Names       []string  `json:"names,omitempty"`
	NotAfter    time.Time `json:"not_after,omitzero"`
	At          time.Time `json:"at"`
	Text        string    `json:"text"` // the rendered body, for webhook and program receivers
}
