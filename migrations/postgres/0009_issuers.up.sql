-- issuers names every issuer the operator's CRL views list (Issuers: the
-- admin panel's CRL page and overview, `hallmark crl status`): one row per
-- issuer, so listing them costs what the number of issuers costs. They read
-- the issuer of every certificate ever stored (a UNION over certificates),
-- on every page view; an index on certificates (issuer_id) would make every
-- issuance pay for a view.
--
-- The store writes a row when a worker publishes an issuer's certificate
-- (IssuerPublish), when it stores an issuer's CRL (CRLStore), and in the
-- issuance transaction of the first certificate of an issuer the process
-- has not registered yet (OrderIssued): a relay's or custom backend's
-- issuer (relay:<name>, custom:<name>) publishes nothing and signs no CRL.
-- Rows are never deleted.
CREATE TABLE issuers (
    id text PRIMARY KEY
);

-- The issuers of what is already stored, read once.
INSERT INTO issuers (id)
SELECT substr(name, 8) FROM settings WHERE name LIKE 'issuer:%'
UNION SELECT issuer_id FROM certificates
UNION SELECT issuer_id FROM crls;
