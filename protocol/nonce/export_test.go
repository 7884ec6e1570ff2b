package nonce

import (
	"context"
	"time"

	"github.com/hallmark-ca/hallmark/store"
)

// Redeem accepts nonce once. A malformed, forged, expired or replayed nonce
// is badNonce (RFC 8555 §6.5), whose detail says which, so the client
// retries with the fresh nonce the error response carries. A database
// failure is serverInternal: the client did nothing wrong.
func (s *Service) Redeem(ctx context.Context, nonce string) error {
	_, _, err := s.RedeemFor(ctx, nonce, "")
	return err
}

// RedeemFor is Redeem for a request signed by the account accountID ("" for
// none) that also returns that account (nil if there is no such account)
// and the database clock, both read in the same store round trip as the
// nonce is consumed. The nonce is judged first: a replayed nonce is
// badNonce whatever the account.
func (s *Service) RedeemFor(ctx context.Context, nonce, accountID string) (*store.Account, time.Time, error) {
	return s.Begin(ctx, nonce, accountID, store.Lookup{}, nil).Wait(ctx)
}
