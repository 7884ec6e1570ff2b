-- An index for an operator's filter that had none (store/sqlstore:
-- certificatesListSQL; TestFleetListPlans).

-- CertificatesList's revoked filter, in the list's seq order. Nothing else
-- answered it: a list of a CA's few revoked certificates read every
-- certificate, newest first, to find them. Partial, so it holds only the
-- revoked ones, and issuance never writes it.
CREATE INDEX certificates_revoked_idx ON certificates (seq) WHERE revoked_at IS NOT NULL;
