-- The audit log is two hash chains, the operators' and system actions
-- (trail = false, kept for good) and the issuance trail (trail = true,
-- pruned oldest first): each row carries its place in its chain (seq),
-- the hash of the row before it (prev_hash) and its own hash, the SHA-256
-- of store.AuditPreimage. `hallmark audit verify` recomputes them and
-- reports the first broken link. Rows recorded before this migration have
-- no seq and are reported as unchained.
ALTER TABLE audit_events
    ADD COLUMN seq       bigint,
    ADD COLUMN prev_hash text,
    ADD COLUMN hash      text;

-- One row per chain: its last seq and hash, which every append updates in
-- the appending transaction (so appends to a chain are serialized by this
-- row's lock, in commit order), and its base: the seq and hash the first
-- kept row follows (0 and 64 zeros until the trail is pruned).
CREATE TABLE audit_chain (
    trail     boolean PRIMARY KEY,
    seq       bigint NOT NULL,
    hash      text NOT NULL,
    base_seq  bigint NOT NULL,
    base_hash text NOT NULL
);
INSERT INTO audit_chain (trail, seq, hash, base_seq, base_hash)
VALUES (false, 0, repeat('0', 64), 0, repeat('0', 64)), (true, 0, repeat('0', 64), 0, repeat('0', 64));

-- A chain's rows in order: verify and the trail's pruning read it, and no
-- two rows of a chain share a place.
CREATE UNIQUE INDEX audit_events_chain_idx ON audit_events (trail, seq);

-- What a row's hash covers; store.AuditPreimage is the same in Go.
CREATE FUNCTION audit_preimage(e audit_events) RETURNS text LANGUAGE sql IMMUTABLE AS $$
SELECT 'hallmark-audit-v1' || E'\n' || e.prev_hash || E'\n' || e.seq::text || E'\n' ||
  CASE WHEN e.trail THEN '1' ELSE '0' END || E'\n' ||
  ((extract(epoch FROM e.at) * 1000000)::bigint)::text || E'\n' ||
  octet_length(e.actor)::text || ':' || e.actor || E'\n' ||
  octet_length(e.action)::text || ':' || e.action || E'\n' ||
  octet_length(e.subject)::text || ':' || e.subject || E'\n' ||
  octet_length(e.detail)::text || ':' || e.detail || E'\n' ||
  octet_length(e.request_id)::text || ':' || e.request_id || E'\n' ||
  octet_length(e.client_addr)::text || ':' || e.client_addr || E'\n' ||
  octet_length(e.ptr_name)::text || ':' || e.ptr_name || E'\n' ||
  octet_length(e.user_agent)::text || ':' || e.user_agent || E'\n'
$$;

-- Every insert, by any statement, joins its chain: no code path can write
-- an unchained row.
CREATE FUNCTION audit_chain_append() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    head audit_chain%ROWTYPE;
BEGIN
    SELECT * INTO head FROM audit_chain WHERE trail = NEW.trail FOR UPDATE;
    NEW.seq := head.seq + 1;
    NEW.prev_hash := head.hash;
    NEW.hash := encode(sha256(convert_to(audit_preimage(NEW), 'UTF8')), 'hex');
    UPDATE audit_chain SET seq = NEW.seq, hash = NEW.hash WHERE trail = NEW.trail;
    RETURN NEW;
END
$$;

CREATE TRIGGER audit_events_chain BEFORE INSERT ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_chain_append();

-- Operators who sign in to the panel with a client certificate: the
-- certificate's SHA-256 (of its DER) names the operator, role is what
-- they may do (viewer, operator, admin); a revoked operator is refused.
CREATE TABLE operators (
    name        text PRIMARY KEY,
    role        text NOT NULL,
    cert_sha256 text NOT NULL UNIQUE,
    not_after   timestamptz NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
