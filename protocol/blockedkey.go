package protocol

import (
	"context"
	"errors"
	"fmt"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// keyBlocked is badPublicKey (RFC 8555 §6.7) when the key whose hash is
// keyHash was reported compromised (store.BlockedKeys), nil when it was
// not. CA/Browser Forum BR §6.1.1.3: the CA "SHALL reject a certificate
// request if ... the CA has previously been made aware that the
// Applicant's Private Key has suffered a Key Compromise". what names the
// key for the client operator ("the CSR's public key", "the account key").
func (s *Server) keyBlocked(ctx context.Context, keyHash []byte, what string) error {
	b, err := s.st.KeyBlockedBy(ctx, keyHash)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return s.storeErr(err, "checking whether the key was reported compromised")
	}
	return acme.New(acme.ProblemBadPublicKey, "%s", b.Problem(what))
}

// jwkBlocked is keyBlocked for an account key: a JWK's public key.
func (s *Server) jwkBlocked(ctx context.Context, pub any, what string) error {
	h, err := store.PublicKeyHash(pub)
	if err != nil {
		return acme.Internal(fmt.Errorf("hashing the account key: %w", err))
	}
	return s.keyBlocked(ctx, h, what)
}
