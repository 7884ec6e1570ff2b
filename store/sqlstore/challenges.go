package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

const challengeCols = `id, authz_id, type, token, status, validated_at, error, validation_record`

// challengeRow holds the columns of challengeCols while they are scanned.
type challengeRow struct {
	c                            store.Challenge
	typ, status, problem, record string
}

func (r *challengeRow) dest() []any {
	return []any{&r.c.ID, &r.c.AuthzID, &r.typ, &r.c.Token, &r.status, tsNull(&r.c.Validated), &r.problem, &r.record}
}

func (r *challengeRow) finish() (*store.Challenge, error) {
	c := r.c
	c.Type = acme.ChallengeType(r.typ)
	c.Status = acme.Status(r.status)
	if r.record != "" {
		c.ValidationRecord = json.RawMessage(r.record)
	}
	var err error
	c.Error, err = parseProblem(r.problem)
	return &c, err
}

func scanChallenge(r interface{ Scan(...any) error }) (*store.Challenge, error) {
	var c challengeRow
	if err := r.Scan(c.dest()...); err != nil {
		return nil, err
	}
	return c.finish()
}

func (s *Store) challengeByID(ctx context.Context, t *txn, id string) (*store.Challenge, error) {
	c, err := scanChallenge(t.queryRow(ctx, `SELECT `+challengeCols+` FROM challenges WHERE id = $1`, id))
	if err != nil {
		return nil, fmt.Errorf("reading challenge %s: %w", id, err)
	}
	return c, nil
}

func (s *Store) ChallengeByID(ctx context.Context, id string) (*store.Challenge, error) {
	return autocommitted(ctx, s, func(t *txn) (*store.Challenge, error) { return s.challengeByID(ctx, t, id) })
}
