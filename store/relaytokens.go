package store

import (
	"context"
	"time"
)

// RelayTokens are the http-01 answers of relay backends that solve their
// upstream's challenges over http (migration 0018): the worker, which
// holds the upstream account key, stores a token's key authorization; the
// frontend, which never holds it, serves it at
// /.well-known/acme-challenge/<token>.
type RelayTokens interface {
	// RelayTokenPut stores token's key authorization for backend, served
	// for ttl (a put again replaces it). Expired rows are swept.
	RelayTokenPut(ctx context.Context, backend, token, keyAuthorization string, ttl time.Duration) error
	// RelayTokenGet is token's key authorization; ErrNotFound when none is
	// stored or it expired.
	RelayTokenGet(ctx context.Context, token string) (string, error)
	// RelayTokenDelete removes token (none stored is no error).
	RelayTokenDelete(ctx context.Context, token string) error
}
