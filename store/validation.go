package store

import "context"

// ValidationTarget is what a validator needs to decide one challenge: the
// challenge, its authorization (whose Challenges is left empty) and the
// thumbprint of the account that owns it, for the key authorization
// (RFC 8555 §8.1).
type ValidationTarget struct {
	Challenge  Challenge
	Authz      Authorization
	Thumbprint string // of the account Authz.AccountID
}

// Validations is what the worker's challenge handler reads.
type Validations interface {
	// ChallengeToValidate reads a challenge with its authorization and its
	// account's thumbprint in one read; ErrNotFound if the challenge does
	// not exist.
	ChallengeToValidate(ctx context.Context, challengeID string) (*ValidationTarget, error)
}
