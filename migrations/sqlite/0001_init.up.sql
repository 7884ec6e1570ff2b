-- Hallmark's records on SQLite. Times are integer microseconds since the
-- Unix epoch (UTC), so comparing with the database clock is an integer
-- compare; JSON documents (contacts, identifiers, problems) are text written
-- and read only by the store. Every table a lookup hits has the index for it.

-- settings holds single values every replica shares, such as the nonce key.
CREATE TABLE settings (
    name  text PRIMARY KEY,
    value blob NOT NULL
);

CREATE TABLE accounts (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    id           text NOT NULL UNIQUE,
    key_jwk      text NOT NULL,
    thumbprint   text NOT NULL UNIQUE,
    contact      text NOT NULL DEFAULT '[]',
    status       text NOT NULL,
    terms_agreed integer NOT NULL DEFAULT 0,
    created_at   integer NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER))
);

CREATE TABLE authorizations (
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,
    id               text NOT NULL UNIQUE,
    account_id       text NOT NULL REFERENCES accounts (id),
    identifier_type  text NOT NULL,
    identifier_value text NOT NULL,
    wildcard         integer NOT NULL DEFAULT 0,
    status           text NOT NULL,
    expires_at       integer NOT NULL,
    created_at       integer NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    updated_at       integer NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER))
);
-- AuthzReusable.
CREATE INDEX authorizations_reuse_idx ON authorizations (account_id, identifier_type, identifier_value, wildcard, status);
-- ExpirePending.
CREATE INDEX authorizations_pending_expires_idx ON authorizations (expires_at) WHERE status = 'pending';

CREATE TABLE challenges (
    id                text PRIMARY KEY,
    authz_id          text NOT NULL REFERENCES authorizations (id),
    position          integer NOT NULL,
    type              text NOT NULL,
    token             text NOT NULL,
    status            text NOT NULL,
    validated_at      integer,
    error             text NOT NULL DEFAULT '',
    validation_record text NOT NULL DEFAULT '',
    updated_at        integer NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER))
);
CREATE INDEX challenges_authz_idx ON challenges (authz_id, position);
-- Stranded.
CREATE INDEX challenges_processing_idx ON challenges (updated_at) WHERE status = 'processing';

CREATE TABLE orders (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    id          text NOT NULL UNIQUE,
    account_id  text NOT NULL REFERENCES accounts (id),
    status      text NOT NULL,
    identifiers text NOT NULL,
    profile     text NOT NULL,
    not_before  integer,
    not_after   integer,
    expires_at  integer NOT NULL,
    csr         blob NOT NULL DEFAULT x'',
    cert_serial text NOT NULL DEFAULT '',
    error       text NOT NULL DEFAULT '',
    replaces    text NOT NULL DEFAULT '',
    created_at  integer NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    updated_at  integer NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER))
);
-- OrdersByAccount.
CREATE INDEX orders_account_idx ON orders (account_id, seq);
CREATE INDEX orders_status_idx ON orders (status, seq);
-- ExpirePending.
CREATE INDEX orders_open_expires_idx ON orders (expires_at) WHERE status IN ('pending', 'ready');
-- Stranded.
CREATE INDEX orders_processing_idx ON orders (updated_at) WHERE status = 'processing';

-- order_authz joins orders to authorizations: a valid authorization is
-- reused by later orders of the same account.
CREATE TABLE order_authz (
    order_id text NOT NULL REFERENCES orders (id),
    authz_id text NOT NULL REFERENCES authorizations (id),
    position integer NOT NULL,
    PRIMARY KEY (order_id, authz_id)
);
CREATE INDEX order_authz_authz_idx ON order_authz (authz_id);

-- order_identifiers lets OrdersList filter by name.
CREATE TABLE order_identifiers (
    order_id text NOT NULL REFERENCES orders (id),
    type     text NOT NULL,
    value    text NOT NULL,
    PRIMARY KEY (order_id, type, value)
);
CREATE INDEX order_identifiers_value_idx ON order_identifiers (value);

CREATE TABLE certificates (
    seq               INTEGER PRIMARY KEY AUTOINCREMENT,
    serial            text NOT NULL UNIQUE,
    order_id          text NOT NULL,
    account_id        text NOT NULL,
    issuer_id         text NOT NULL,
    profile           text NOT NULL,
    der               blob NOT NULL,
    chain_pem         blob NOT NULL,
    names             text NOT NULL,
    not_before        integer NOT NULL,
    not_after         integer NOT NULL,
    issued_at         integer NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    revoked_at        integer,
    revocation_reason integer NOT NULL DEFAULT 0,
    replaced_by       text NOT NULL DEFAULT ''
);
CREATE INDEX certificates_account_idx ON certificates (account_id, seq);
CREATE INDEX certificates_order_idx ON certificates (order_id);
CREATE INDEX certificates_not_after_idx ON certificates (not_after);

-- certificate_names lets CertificatesList filter by name.
CREATE TABLE certificate_names (
    serial text NOT NULL REFERENCES certificates (serial),
    name   text NOT NULL,
    PRIMARY KEY (serial, name)
);
CREATE INDEX certificate_names_name_idx ON certificate_names (name);

-- revocations are the entries of an issuer's CRL.
CREATE TABLE revocations (
    serial     text PRIMARY KEY REFERENCES certificates (serial),
    issuer_id  text NOT NULL,
    revoked_at integer NOT NULL,
    reason     integer NOT NULL
);
CREATE INDEX revocations_issuer_idx ON revocations (issuer_id, revoked_at);

CREATE TABLE crls (
    issuer_id   text NOT NULL,
    number      integer NOT NULL,
    this_update integer NOT NULL,
    next_update integer NOT NULL,
    der         blob NOT NULL,
    PRIMARY KEY (issuer_id, number)
);

-- nonces_consumed is the shared set of used nonces (RFC 8555 §6.5: a nonce
-- is accepted once, by any replica).
CREATE TABLE nonces_consumed (
    nonce      text PRIMARY KEY,
    expires_at integer NOT NULL
);
CREATE INDEX nonces_consumed_expires_idx ON nonces_consumed (expires_at);

-- leases name singleton work (CRL signing); expiry is on the database clock.
CREATE TABLE leases (
    name       text PRIMARY KEY,
    holder     text NOT NULL,
    expires_at integer NOT NULL
);

CREATE TABLE audit_events (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    actor   text NOT NULL,
    action  text NOT NULL,
    subject text NOT NULL DEFAULT '',
    detail  text NOT NULL DEFAULT '',
    at      integer NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER))
);
