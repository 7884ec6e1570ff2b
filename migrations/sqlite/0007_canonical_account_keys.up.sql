-- Account keys are stored with only the members RFC 7638 §3.2 requires for
-- their type (EC: crv, kty, x, y; RSA: e, kty, n; OKP: crv, kty, x), in the
-- order go-jose writes them: what protocol/keys.go (jwkIdentity) stores from
-- now on. Before, it stored every member the client's "jwk" carried (kid,
-- alg, use, x5c, ...), so a client could make its row, read with every
-- nonce, and the frontend's per-account caches as large as a request body.
--
-- This rewrites the rows that carry anything else. A row holding only the
-- required members (every account a client registered without extras) is
-- already byte-for-byte what it would become and is not touched. Accounts
-- are found by thumbprint, which does not change; a frontend still holding
-- a rewritten row's old JSON (protocol/ahead.go, fold.go) verifies that
-- account's next request twice. json_object writes no whitespace, as Go does.
WITH canonical (seq, jwk) AS (
    SELECT seq, CASE
        WHEN json_extract(key_jwk, '$.kty') = 'EC' AND json_type(key_jwk, '$.crv') = 'text'
             AND json_type(key_jwk, '$.x') = 'text' AND json_type(key_jwk, '$.y') = 'text'
        THEN json_object('kty', 'EC', 'crv', json_extract(key_jwk, '$.crv'),
                         'x', json_extract(key_jwk, '$.x'), 'y', json_extract(key_jwk, '$.y'))
        WHEN json_extract(key_jwk, '$.kty') = 'RSA' AND json_type(key_jwk, '$.n') = 'text'
             AND json_type(key_jwk, '$.e') = 'text'
        THEN json_object('kty', 'RSA', 'n', json_extract(key_jwk, '$.n'), 'e', json_extract(key_jwk, '$.e'))
        WHEN json_extract(key_jwk, '$.kty') = 'OKP' AND json_type(key_jwk, '$.crv') = 'text'
             AND json_type(key_jwk, '$.x') = 'text'
        THEN json_object('kty', 'OKP', 'crv', json_extract(key_jwk, '$.crv'), 'x', json_extract(key_jwk, '$.x'))
    END
    FROM accounts
    -- The rows with a member no key type requires.
    WHERE EXISTS (SELECT 1 FROM json_each(accounts.key_jwk) WHERE key NOT IN ('kty', 'crv', 'x', 'y', 'n', 'e'))
)
UPDATE accounts SET key_jwk = c.jwk
FROM canonical AS c
WHERE accounts.seq = c.seq AND c.jwk IS NOT NULL AND accounts.key_jwk <> c.jwk;
