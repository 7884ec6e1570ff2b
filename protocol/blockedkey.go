package protocol

import (
	"context"
	"errors"
	"fmt"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/goodkey"
	"github.com/hallmark-ca/hallmark/store"
)

// keyBlocked is badPublicKey (RFC 8555 §6.7) when the key whose hash is
// keyHash was reported compromised (store.BlockedKeys), nil when it was
// not. CA/Browser Forum BR §6.1.1.3: the CA "SHALL reject a certificate
// request if ... the CA has previously been made aware that the
// Applicant's Private Key has suffered a Key Compromise". what names the
// key for the client operator ("the CSR's public key", "the account key").
func (s *Server) keyBlocked(ctx context.Context, keyHash []byte, what string) error {
	b, err := s.st.blocked.KeyBlockedBy(ctx, keyHash)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return s.storeErr(err, "checking whether the key was reported compromised")
	}
	return acme.New(acme.ProblemBadPublicKey, "%s", b.Problem(what))
}

// accountKeyRefused is badPublicKey for a key that may not become an
// account's (newAccount, keyChange): one whose private half anyone can
// compute from the public half (goodkey: whoever did could act as the
// account), or one reported compromised. Checked once, when the key is
// first offered, not on every request it signs.
func (s *Server) accountKeyRefused(ctx context.Context, pub any, what string) error {
	if err := goodkey.Check(pub); err != nil {
		return acme.New(acme.ProblemBadPublicKey, "%s is unsafe: %v; generate a new key", what, err)
	}
	h, err := store.PublicKeyHash(pub)
	if err != nil {
		return acme.Internal(fmt.Errorf("hashing the account key: %w", err))
	}
	return s.keyBlocked(ctx, h, what)
}
