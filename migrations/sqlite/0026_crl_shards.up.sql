-- Sharded CRLs: each certificate names its CRL shard (chosen at issuance,
-- written into its CRL distribution point); certificates stored before
-- this migration are on shard 0, whose URL is the unsharded one they name.
ALTER TABLE certificates ADD COLUMN crl_shard integer NOT NULL DEFAULT 0;

-- A revocation carries its certificate's shard and expiry, and the number
-- of the first CRL that listed it: an entry leaves its shard's CRL once its
-- certificate has expired and it was listed at least once.
ALTER TABLE revocations ADD COLUMN shard integer NOT NULL DEFAULT 0;
ALTER TABLE revocations ADD COLUMN not_after integer;
ALTER TABLE revocations ADD COLUMN listed_in integer;
UPDATE revocations SET not_after = (SELECT c.not_after FROM certificates c WHERE c.serial = revocations.serial);
CREATE INDEX revocations_shard_idx ON revocations (issuer_id, shard);

-- Each shard is numbered on its own (RFC 5280 §5.2.3 per CRL scope); SQLite
-- cannot change a primary key, so the table is rebuilt.
CREATE TABLE crls_sharded (
    issuer_id   text NOT NULL,
    shard       integer NOT NULL DEFAULT 0,
    number      integer NOT NULL,
    this_update integer NOT NULL,
    next_update integer NOT NULL,
    der         blob NOT NULL,
    PRIMARY KEY (issuer_id, shard, number)
);
INSERT INTO crls_sharded (issuer_id, shard, number, this_update, next_update, der)
SELECT issuer_id, 0, number, this_update, next_update, der FROM crls;
DROP TABLE crls;
ALTER TABLE crls_sharded RENAME TO crls;
