package sqlstore

import (
	"context"
	"fmt"
	"time"
)

// The relay backends' http-01 answers (store.RelayTokens): a handful of
// rows at a time, swept by the next put rather than by a job of their own.

func (s *Store) RelayTokenPut(ctx context.Context, backend, token, keyAuthorization string, ttl time.Duration) error {
	err := s.inTx(ctx, func(t *txn) error {
		if _, err := t.exec(ctx, `DELETE FROM relay_http_tokens WHERE expires_at <= {now}`); err != nil {
			return fmt.Errorf("removing expired tokens: %w", err)
		}
		_, err := t.exec(ctx, `INSERT INTO relay_http_tokens (token, key_authorization, backend, expires_at) VALUES ($1, $2, $3, {now+$4})
ON CONFLICT (token) DO UPDATE SET key_authorization = excluded.key_authorization, backend = excluded.backend, expires_at = excluded.expires_at`,
			token, keyAuthorization, backend, ttl.Microseconds())
		return err
	})
	if err != nil {
		return fmt.Errorf("storing the http-01 answer of relay backend %s: %w", backend, err)
	}
	return nil
}

func (s *Store) RelayTokenGet(ctx context.Context, token string) (string, error) {
	var ka string
	err := s.autocommit(ctx, func(t *txn) error {
		return t.queryRow(ctx, `SELECT key_authorization FROM relay_http_tokens WHERE token = $1 AND expires_at > {now}`, token).Scan(&ka)
	})
	if err != nil {
		return "", fmt.Errorf("reading a relay's http-01 answer: %w", err)
	}
	return ka, nil
}

func (s *Store) RelayTokenDelete(ctx context.Context, token string) error {
	err := s.autocommit(ctx, func(t *txn) error {
		_, err := t.exec(ctx, `DELETE FROM relay_http_tokens WHERE token = $1`, token)
		return err
	})
	if err != nil {
		return fmt.Errorf("removing a relay's http-01 answer: %w", err)
	}
	return nil
}
