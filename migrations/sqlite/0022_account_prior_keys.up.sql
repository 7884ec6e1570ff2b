-- account_prior_keys are the thumbprints of keys an account has replaced
-- (keyChange), written in the swap's transaction: a dns-persist-01 record
-- whose hashed accounturi (draft-ietf-acme-dns-persist-02 §4.2) was made
-- with an earlier key keeps validating after a key rollover. Kept for the
-- account's lifetime, as the draft asks.
CREATE TABLE account_prior_keys (
    account_id  text NOT NULL REFERENCES accounts (id),
    thumbprint  text NOT NULL,
    replaced_at integer NOT NULL,
    PRIMARY KEY (account_id, thumbprint)
);
