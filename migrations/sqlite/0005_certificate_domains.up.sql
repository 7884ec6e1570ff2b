-- certificate_domains answers the certificates-per-domain rate limit
-- (store/sqlstore/ratelimit.go) with an index lookup. Counting from
-- certificate_names needed "name LIKE '%.' || domain", which no B-tree index
-- answers: every newOrder read every certificate name ever stored (and
-- SQLite's LIKE, unlike PostgreSQL's, ignored case).
--
-- For each certificate, each distinct domain a rate limit can ask about: each
-- of its names, lowercased without a trailing dot, and every suffix of a DNS
-- name at a label boundary that still has two labels (x.example.test gives
-- x.example.test and example.test, not test). An IP address is only itself.
-- The store fills it at issuance, in the batch that writes certificate_names;
-- issued_at is the certificate's (integer microseconds, as every time here).
CREATE TABLE certificate_domains (
    domain    text NOT NULL,
    serial    text NOT NULL,
    issued_at integer NOT NULL,
    PRIMARY KEY (domain, serial)
);
CREATE INDEX certificate_domains_issued_idx ON certificate_domains (domain, issued_at);

-- The certificates issued before this migration. An address is a name of
-- digits and dots only, or one with a colon (sqlstore.certificateDomains
-- draws the same line).
WITH RECURSIVE names (serial, domain) AS (
    SELECT serial, rtrim(lower(name), '.') FROM certificate_names
), suffixes (serial, domain) AS (
    SELECT serial, domain FROM names WHERE domain <> ''
    UNION
    SELECT serial, substr(domain, instr(domain, '.') + 1) FROM suffixes
    WHERE instr(substr(domain, instr(domain, '.') + 1), '.') > 0
      AND domain GLOB '*[^0-9.]*' AND instr(domain, ':') = 0
)
INSERT INTO certificate_domains (domain, serial, issued_at)
SELECT s.domain, s.serial, c.issued_at FROM suffixes s JOIN certificates c ON c.serial = s.serial
WHERE true
ON CONFLICT DO NOTHING;
