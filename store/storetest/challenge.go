package storetest

import (
	"context"

	"github.com/hallmark-ca/hallmark/store"
)

// ChallengeByID reads one challenge for a test, through the read the
// frontend and the worker share: the store has no read of a challenge
// alone.
func ChallengeByID(ctx context.Context, s store.ChallengeReads, id string) (*store.Challenge, error) {
	ca, err := s.ChallengeWithAuthz(ctx, id)
	if err != nil {
		return nil, err
	}
	return &ca.Challenge, nil
}
