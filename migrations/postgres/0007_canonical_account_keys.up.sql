-- Account keys are stored with only the members RFC 7638 §3.2 requires for
-- their type (EC: crv, kty, x, y; RSA: e, kty, n; OKP: crv, kty, x), in the
-- order go-jose writes them: what protocol/keys.go (jwkIdentity) stores from
-- now on. Before, it stored every member the client's "jwk" carried (kid,
-- alg, use, x5c, ...), so a client could make its row, read with every
-- nonce, and the frontends' per-account caches as large as a request body.
--
-- This rewrites the rows that carry anything else. A row holding only the
-- required members (every account a client registered without extras) is
-- already byte-for-byte what it would become and is not touched. Accounts
-- are found by thumbprint, which does not change; a frontend still holding
-- a rewritten row's old JSON (protocol/ahead.go, fold.go) verifies that
-- account's next request twice.
WITH legacy AS MATERIALIZED (
    -- The rows with a member no key type requires: one jsonb parse a row.
    SELECT seq, j FROM (SELECT seq, key_jwk::jsonb AS j FROM accounts) AS a
    WHERE j - ARRAY['kty', 'crv', 'x', 'y', 'n', 'e'] <> '{}'::jsonb
), canonical (seq, jwk) AS (
    SELECT seq, CASE
        WHEN j ->> 'kty' = 'EC' AND jsonb_typeof(j -> 'crv') = 'string'
             AND jsonb_typeof(j -> 'x') = 'string' AND jsonb_typeof(j -> 'y') = 'string'
        THEN '{"kty":"EC","crv":' || to_json(j ->> 'crv')::text || ',"x":' || to_json(j ->> 'x')::text
             || ',"y":' || to_json(j ->> 'y')::text || '}'
        WHEN j ->> 'kty' = 'RSA' AND jsonb_typeof(j -> 'n') = 'string' AND jsonb_typeof(j -> 'e') = 'string'
        THEN '{"kty":"RSA","n":' || to_json(j ->> 'n')::text || ',"e":' || to_json(j ->> 'e')::text || '}'
        WHEN j ->> 'kty' = 'OKP' AND jsonb_typeof(j -> 'crv') = 'string' AND jsonb_typeof(j -> 'x') = 'string'
        THEN '{"kty":"OKP","crv":' || to_json(j ->> 'crv')::text || ',"x":' || to_json(j ->> 'x')::text || '}'
    END
    FROM legacy
)
UPDATE accounts SET key_jwk = c.jwk
FROM canonical AS c
WHERE accounts.seq = c.seq AND c.jwk IS NOT NULL AND accounts.key_jwk <> c.jwk;
