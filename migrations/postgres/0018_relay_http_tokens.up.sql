-- relay_http_tokens are the http-01 answers of relay backends with
-- challenge_strategy http01: the worker writes the key authorization of an
-- upstream challenge's token (made with the relay account's key, which
-- only the worker holds) before accepting it, the frontend's public http
-- listener serves it at /.well-known/acme-challenge/<token> to the
-- upstream's validator, and the worker deletes it once the authorization
-- is decided. A row left by a worker that died is served until the
-- housekeeping of expired rows; the token is the upstream's, unguessable.
CREATE TABLE relay_http_tokens (
    token             text PRIMARY KEY,
    key_authorization text NOT NULL,
    backend           text NOT NULL,
    expires_at        timestamptz NOT NULL
);
