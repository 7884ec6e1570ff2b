-- blocked_keys are the public keys Hallmark was told are compromised: it
-- never certifies one again (CA/Browser Forum BR §6.1.1.3: the CA SHALL
-- reject a certificate request once it has been made aware that the
-- applicant's private key suffered a key compromise). A key is blocked by
-- the revocation of one of its certificates with reason 1 (keyCompromise),
-- by any path, in that revocation's transaction, or by an operator for a
-- key Hallmark never certified (hallmark keys block). The key is the
-- SHA-256 of its DER SubjectPublicKeyInfo, as Boulder's blockedKeys keys
-- it: the same for a certificate's, a CSR's and a JWK's key.
--
-- why says what reported it: the revocation of serial (a certificate of
-- ours; '' when the operator blocked the key without one) and how, or
-- the operator's source; actor is who (acme:<account>, cli:<user>,
-- admin:<user>), as the audit log names them. A row is never deleted.
CREATE TABLE blocked_keys (
    spki_sha256 bytea PRIMARY KEY,
    blocked_at  timestamptz NOT NULL DEFAULT now(),
    serial      text NOT NULL DEFAULT '',
    why         text NOT NULL,
    actor       text NOT NULL
);

-- A certificate's key, so that a key reported compromised finds its other
-- certificates to revoke (BR §4.9.1.1: every certificate with that key,
-- within 24 hours). Written with the certificate (the worker hashes the
-- signed certificate's key). Rows stored before this migration stay NULL:
-- SQL cannot take a key out of DER, and migrations have no Go step; a
-- revocation of such a certificate still blocks its key (the store hashes
-- its DER), but it is not found as another certificate's sibling.
-- The keys blocked lately, for housekeeping's sweep (KeySweep): a
-- certificate whose order was read for signing before its key was blocked
-- can be stored after the block's own search for the key's certificates.
CREATE INDEX blocked_keys_at_idx ON blocked_keys (blocked_at);

ALTER TABLE certificates ADD COLUMN spki_sha256 bytea;

-- The siblings' lookup, by key. Every issuance pays one entry of 32 bytes
-- (the insert already maintains the certificate's other indexes and its
-- names' and domains' rows); in exchange a key's certificates are its own
-- rows, found in the revocation's own transaction, never a scan of the
-- table. Partial, so the rows stored before it (NULL) cost nothing to
-- index here.
CREATE INDEX certificates_spki_idx ON certificates (spki_sha256) WHERE spki_sha256 IS NOT NULL;

-- The key of an order's CSR, written by the finalize that stores the CSR,
-- so that the issuing worker's one read of the order (OrderToIssue) tells
-- whether the key was blocked since, by key, without parsing the CSR.
ALTER TABLE orders ADD COLUMN csr_spki_sha256 bytea;
