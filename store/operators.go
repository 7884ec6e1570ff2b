package store

import (
	"context"
	"time"
)

// The panel's roles, each allowing what the one before it does and more.
const (
	RoleViewer   = "viewer"   // reads everything
	RoleOperator = "operator" // revokes, deactivates, retries and abandons jobs, lifts pauses, moves ARI windows
	RoleAdmin    = "admin"    // EAB keys, key blocks, issuers and operators
)

// Roles are the roles in ascending order of power.
var Roles = []string{RoleViewer, RoleOperator, RoleAdmin}

// RoleAllows reports whether role may do what need requires.
func RoleAllows(role, need string) bool {
	rank := func(r string) int {
		for i, x := range Roles {
			if x == r {
				return i
			}
		}
		return -1
	}
	return rank(role) >= 0 && rank(role) >= rank(need)
}

// Operator is a person who signs in to the panel with a client
// certificate, named by the SHA-256 of the certificate's DER (hex).
type Operator struct {
	Name       string
	Role       string
	CertSHA256 string
	NotAfter   time.Time
	CreatedAt  time.Time
	RevokedAt  *time.Time
}

// Operators are the panel's operators (migration 0023). Adding and
// revoking one records its audit event in the same transaction.
type Operators interface {
	// OperatorAdd records o; ErrConflict when its name or certificate is
	// taken.
	OperatorAdd(ctx context.Context, o Operator, ev AuditEvent) error
	// OperatorByCert is the operator whose certificate has that SHA-256;
	// ErrNotFound when none.
	OperatorByCert(ctx context.Context, sha256Hex string) (*Operator, error)
	OperatorsList(ctx context.Context) ([]Operator, error)
	// OperatorRevoke marks the operator revoked: their certificate is
	// refused from then on. ErrNotFound for an unknown or already revoked
	// operator.
	OperatorRevoke(ctx context.Context, name string, ev AuditEvent) error
}
