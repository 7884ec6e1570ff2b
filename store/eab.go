package store

import (
	"context"
	"time"
)

// EABKey is an external account binding key (RFC 8555 §7.3.4) issued by an
// operator: an HMAC key named by ID that binds one ACME account.
type EABKey struct {
	ID     string
	MACKey []byte // the HMAC-SHA256 key; secret
	Label  string // who it was issued to, for operators
	// AllowedDomains are DNS suffixes the bound account may order
	// ("example.com" covers example.com and every name under it); empty
	// with empty AllowedIPRanges means no limit beyond the server policy.
	AllowedDomains []string
	// AllowedIPRanges are CIDRs the bound account may order.
	AllowedIPRanges []string
	// PreValidated says the operator vouches for the allowed names: orders
	// of the bound account get authorizations born valid, skipping
	// challenges. Only meaningful with a limit set.
	PreValidated bool
	AccountID    string // the account it bound; "" while unused
	CreatedAt    time.Time
	BoundAt      *time.Time
}

// Limited reports whether the key limits its account's identifiers.
func (k *EABKey) Limited() bool { return len(k.AllowedDomains) > 0 || len(k.AllowedIPRanges) > 0 }

// ExternalAccounts is what external account binding needs of the store.
type ExternalAccounts interface {
	// EABCreate stores a new key and records ev in the same transaction: a
	// key nobody audited never exists, and an audit failure leaves no key
	// behind whose MAC the operator was never shown. ErrConflict if its ID
	// exists.
	EABCreate(ctx context.Context, k EABKey, ev AuditEvent) (*EABKey, error)
	EABByID(ctx context.Context, id string) (*EABKey, error)
	// EABDelete deletes the key id, which has bound no account, and records
	// ev in the same transaction: a key handed out and never used (leaked,
	// or its team gone) can be withdrawn before anyone binds it.
	// ErrNotFound if there is no such key; ErrConflict if it already bound
	// an account, whose limits it carries (deactivate the account instead).
	EABDelete(ctx context.Context, id string, ev AuditEvent) error
	EABList(ctx context.Context, p Page) ([]*EABKey, string, error)
	// AccountCreateBound creates the account and binds the unused key keyID
	// to it in one transaction. ErrConflict (and the existing account) when
	// an account with the same thumbprint exists, as AccountCreate;
	// ErrConflict and a nil account when the key already bound another
	// account; ErrNotFound when there is no such key.
	AccountCreateBound(ctx context.Context, a *Account, keyID string) (*Account, error)
	// AccountEAB is the key that bound the account; ErrNotFound if the
	// account was made without one.
	AccountEAB(ctx context.Context, accountID string) (*EABKey, error)
}

// PreAuthorizations is what newAuthz (RFC 8555 §7.4.1) needs of the store.
type PreAuthorizations interface {
	// AuthzCreate writes a standalone authorization with its challenges
	// (newAuthz, RFC 8555 §7.4.1) and returns it as stored. A pending one
	// takes its unit of limits.PendingAuthzs in the same transaction, as
	// OrderCreate does, or nothing is written and the error is a
	// *RateLimited.
	AuthzCreate(ctx context.Context, a *Authorization, limits OrderLimits) (*Authorization, error)
}
