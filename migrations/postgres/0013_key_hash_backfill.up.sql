-- The certificates stored before migration 0012 have no key hash
-- (spki_sha256 NULL), so a key reported compromised did not find them
-- among its certificates to revoke. SQL cannot take a key out of DER;
-- housekeeping hashes them a batch at a time (store KeyHashBackfill), and
-- this index is its work list: partial, so it holds only those rows (none
-- on a database created at 0012 or later, and none once the backfill is
-- done), and no certificate stored since pays for it. A DER that does not
-- parse is given an empty hash, which leaves the list and matches no key.
CREATE INDEX certificates_unhashed_idx ON certificates (seq) WHERE spki_sha256 IS NULL;
