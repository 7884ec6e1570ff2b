package sqlstore

import (
	"context"
	"fmt"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// ChallengeWithAuthz is one autocommitted statement: the worker reads it
// for every challenge_validate job, before the network work of validating.
func (s *Store) ChallengeWithAuthz(ctx context.Context, challengeID string) (*store.ChallengeAuthz, error) {
	out, err := autocommitted(ctx, s, func(t *txn) (*store.ChallengeAuthz, error) {
		return scanChallengeAuthz(t.queryRow(ctx, challengeAuthzSQL, challengeID))
	})
	if err != nil {
		return nil, fmt.Errorf("reading challenge %s to validate: %w", challengeID, err)
	}
	return out, nil
}

// challengeAuthzSQL reads a challenge with its authorization and the
// account's thumbprint (the foreign keys guarantee both exist).
const challengeAuthzSQL = `SELECT c.id, c.authz_id, c.type, c.token, c.status, c.validated_at, c.error, c.validation_record,
  a.id, a.account_id, a.identifier_type, a.identifier_value, a.wildcard, a.status, a.expires_at, a.created_at, acct.thumbprint
FROM challenges c
JOIN authorizations a ON a.id = c.authz_id
JOIN accounts acct ON acct.id = a.account_id
WHERE c.id = $1`

func scanChallengeAuthz(r interface{ Scan(...any) error }) (*store.ChallengeAuthz, error) {
	var out store.ChallengeAuthz
	var c challengeRow
	var typ, status string
	a := &out.Authz
	if err := r.Scan(append(c.dest(),
		&a.ID, &a.AccountID, &typ, &a.Identifier.Value, &a.Wildcard, &status, ts(&a.Expires), ts(&a.CreatedAt), &out.Thumbprint)...); err != nil {
		return nil, err
	}
	a.Identifier.Type = acme.IdentifierType(typ)
	a.Status = acme.Status(status)
	ch, err := c.finish()
	if err != nil {
		return nil, err
	}
	out.Challenge = *ch
	return &out, nil
}
