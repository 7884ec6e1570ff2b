package store

import "context"

// ChallengeAuthz is a challenge with its authorization (whose Challenges is
// left empty) and the thumbprint of the account that owns it: what a
// validator needs for the key authorization (RFC 8555 §8.1), and what the
// frontend's challenge POST checks ownership and status against.
type ChallengeAuthz struct {
	Challenge  Challenge
	Authz      Authorization
	Thumbprint string // of the account Authz.AccountID
}

// ChallengeReads is the one read the worker's challenge handler and the
// frontend's challenge POST share.
type ChallengeReads interface {
	// ChallengeWithAuthz reads a challenge with its authorization and its
	// account's thumbprint in one read; ErrNotFound if the challenge does
	// not exist.
	ChallengeWithAuthz(ctx context.Context, challengeID string) (*ChallengeAuthz, error)
}
