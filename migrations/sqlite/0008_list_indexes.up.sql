-- Indexes for the operator's filters that had none (store/sqlstore:
-- certificatesListSQL, movableSQL; TestFleetListPlans).

-- CertificatesList's revoked filter, in the list's seq order. Nothing else
-- answered it: a list of a CA's few revoked certificates read every
-- certificate, newest first, to find them. Partial, so it holds only the
-- revoked ones, and issuance never writes it.
CREATE INDEX certificates_revoked_idx ON certificates (seq) WHERE revoked_at IS NOT NULL;

-- RenewalMove by issuer or by profile (hallmark ari move --issuer,
-- --profile): each is one range of that issuer's or profile's live
-- certificates (not_after > now). Without them a move read every live
-- certificate of every issuer and profile to choose one's.
CREATE INDEX certificates_issuer_idx ON certificates (issuer_id, not_after);
CREATE INDEX certificates_profile_idx ON certificates (profile, not_after);
