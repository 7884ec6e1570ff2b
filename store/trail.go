package store

import (
	"context"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// The actions of the issuance trail: what was asked of the CA and by whom
// (AuditEvent.Origin), kept with the operators' actions in one log.
const (
	ActionAccountCreated    = "account.created"    // newAccount made an account
	ActionOrderRefused      = "order.refused"      // newOrder refused (policy, limits, a bad request)
	ActionFinalizeRefused   = "finalize.refused"   // finalize refused (a bad CSR, a blocked key, not ready)
	ActionOrderInvalid      = "order.invalid"      // the worker failed an order instead of signing
	ActionValidationFailed  = "validation.failed"  // a challenge failed validation
	ActionValidationValid   = "validation.valid"   // a challenge passed validation
	ActionCertificateIssued = "certificate.issued" // the worker stored a certificate
)

// TrailActions are the issuance trail's actions, for help texts and checks.
var TrailActions = []string{ActionAccountCreated, ActionOrderRefused, ActionFinalizeRefused,
	ActionOrderInvalid, ActionValidationFailed, ActionValidationValid, ActionCertificateIssued}

// AuditFilter narrows AuditFind; empty fields match everything.
type AuditFilter struct {
	Action string // one action, e.g. "certificate.issued"
	// Trail, when set, keeps only the issuance trail (true) or only the
	// operators' and system actions (false).
	Trail     *bool
	Since     time.Time // events at or after
	RequestID string    // events of one request
}

// Trail is the issuance trail's side of the audit log (AuditEvent.Trail).
// Its events are written in the transaction of what they record: a
// certificate's with the certificate (Issued.Trail), a failed
// validation's with the verdict (Verdict.Trail), and these.
type Trail interface {
	// AccountCreateTrailed is AccountCreate, or AccountCreateBound when
	// keyID is set, with ev recorded in the same transaction: its Subject
	// is the new account's id, and its Actor, when empty, the account
	// ("acme:<id>"). A conflict records nothing.
	AccountCreateTrailed(ctx context.Context, a *Account, keyID string, ev AuditEvent) (*Account, error)
	// OrderFailTrailed is OrderFail with ev recorded in its transaction.
	OrderFailTrailed(ctx context.Context, orderID string, p acme.Problem, ev AuditEvent) error
	// AuditFind is AuditList narrowed by f, newest first.
	AuditFind(ctx context.Context, f AuditFilter, p Page) ([]AuditEvent, string, error)
	// AuditPrune deletes up to limit trail events recorded before before,
	// oldest first in the trail's chain (stopping at the first younger
	// row) and moves the chain's base, and says how many; operators'
	// actions are kept.
	AuditPrune(ctx context.Context, before time.Time, limit int) (int64, error)
}
