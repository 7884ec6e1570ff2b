-- issuer_records are the issuers an operator manages (store.IssuerRecords):
-- a local intermediate made by `ca init` or `ca intermediate`, with its
-- lifecycle. active: a profile may name it and it signs; retiring: it signs
-- nothing but CRLs until its last certificate has expired; retired: nothing.
-- A relay's or custom backend's issuer has no record.
CREATE TABLE issuer_records (
    id         text PRIMARY KEY,
    name       text NOT NULL,
    key_type   text NOT NULL,
    state      text NOT NULL,
    not_after  integer NOT NULL,
    created_at integer NOT NULL
);

-- issuer_chains are an issuer's alternate chains (RFC 8555 §7.4.2), PEM,
-- numbered from 1: a cross-signed intermediate, or a chain to a new root.
-- The default chain is each certificate's own (certificates.chain_pem).
CREATE TABLE issuer_chains (
    issuer_id text NOT NULL REFERENCES issuer_records (id),
    idx       integer NOT NULL,
    chain_pem blob NOT NULL,
    PRIMARY KEY (issuer_id, idx)
);

-- profile_issuers are the issuers each profile signs with: a rotation
-- replaces a profile's rows in one transaction. A worker reads them per
-- job (cached for a second), so a rotation needs no restart.
CREATE TABLE profile_issuers (
    profile   text NOT NULL,
    issuer_id text NOT NULL REFERENCES issuer_records (id),
    PRIMARY KEY (profile, issuer_id)
);
