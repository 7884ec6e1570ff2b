-- Where an issuer's key lives (store.IssuerRecord): backend is the
-- [backends.<name>] of type pkcs11 whose token holds it, found there by
-- key_label and key_id (hex CKA_ID); '' for a local issuer, whose key file
-- is in ca.dir. A worker that mounts the backend signs with the key when a
-- profile of that backend is rotated to the issuer.
ALTER TABLE issuer_records ADD COLUMN backend text NOT NULL DEFAULT '';
ALTER TABLE issuer_records ADD COLUMN key_label text NOT NULL DEFAULT '';
ALTER TABLE issuer_records ADD COLUMN key_id text NOT NULL DEFAULT '';
