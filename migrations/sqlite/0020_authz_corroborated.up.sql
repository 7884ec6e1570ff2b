-- corroborated marks an authorization whose validation network
-- perspectives corroborated (CA/B BR §3.2.2.9), set with its valid verdict:
-- a profile that requires corroboration neither reuses nor issues on one
-- without it.
ALTER TABLE authorizations ADD COLUMN corroborated integer NOT NULL DEFAULT 0;
