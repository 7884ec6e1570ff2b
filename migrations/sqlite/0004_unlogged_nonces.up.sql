-- The nonce epoch (see the PostgreSQL migration of the same number): nonces
-- are accepted only under the current epoch. SQLite has no unlogged tables,
-- so here the epoch never changes; the table keeps the two stores' nonce
-- code and contract the same.
CREATE TABLE nonce_epoch (
    id    integer PRIMARY KEY CHECK (id = 1),
    epoch integer NOT NULL CHECK (epoch <> 0)
);
