-- The issuance trail joins the audit log: every account created, order or
-- finalize refused, order failed, validation failed and certificate
-- issued is an audit event (trail = 1) with the request it came from:
-- its id (X-Request-Id), the client's address, the client's name when the
-- access policy looked it up (PTR), and its User-Agent. Operators' and
-- system actions keep trail = 0 and empty origins; they are never
-- deleted, trail events after audit.retention_days (housekeeping).
ALTER TABLE audit_events ADD COLUMN trail integer NOT NULL DEFAULT 0;
ALTER TABLE audit_events ADD COLUMN request_id text NOT NULL DEFAULT '';
ALTER TABLE audit_events ADD COLUMN client_addr text NOT NULL DEFAULT '';
ALTER TABLE audit_events ADD COLUMN ptr_name text NOT NULL DEFAULT '';
ALTER TABLE audit_events ADD COLUMN user_agent text NOT NULL DEFAULT '';

-- Housekeeping deletes trail events by age, oldest first, and a list asks
-- for those since a time: both read this index, which the operators' few
-- rows share.
CREATE INDEX audit_events_at_idx ON audit_events (at);
