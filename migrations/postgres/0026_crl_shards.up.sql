-- Sharded CRLs: each certificate names its CRL shard (chosen at issuance,
-- written into its CRL distribution point); certificates stored before
-- this migration are on shard 0, whose URL is the unsharded one they name.
ALTER TABLE certificates ADD COLUMN crl_shard integer NOT NULL DEFAULT 0;

-- A revocation carries its certificate's shard and expiry, and the number
-- of the first CRL that listed it: an entry leaves its shard's CRL once its
-- certificate has expired and it was listed at least once.
ALTER TABLE revocations ADD COLUMN shard integer NOT NULL DEFAULT 0;
ALTER TABLE revocations ADD COLUMN not_after timestamptz;
ALTER TABLE revocations ADD COLUMN listed_in bigint;
UPDATE revocations r SET not_after = c.not_after FROM certificates c WHERE c.serial = r.serial;
CREATE INDEX revocations_shard_idx ON revocations (issuer_id, shard);

-- Each shard is numbered on its own (RFC 5280 §5.2.3 per CRL scope).
ALTER TABLE crls ADD COLUMN shard integer NOT NULL DEFAULT 0;
ALTER TABLE crls DROP CONSTRAINT crls_pkey;
ALTER TABLE crls ADD PRIMARY KEY (issuer_id, shard, number);
