-- The audit log is two hash chains, the operators' and system actions
-- (trail = 0, kept for good) and the issuance trail (trail = 1, pruned
-- oldest first): each row carries its place in its chain (seq), the hash
-- of the row before it (prev_hash) and its own hash, the SHA-256 of
-- store.AuditPreimage (hallmark_sha256 is registered by store/sqlite).
-- `hallmark audit verify` recomputes them and reports the first broken
-- link. Rows recorded before this migration have no seq and are reported
-- as unchained.
ALTER TABLE audit_events ADD COLUMN seq integer;
ALTER TABLE audit_events ADD COLUMN prev_hash text;
ALTER TABLE audit_events ADD COLUMN hash text;

-- One row per chain: its last seq and hash, which every append updates in
-- the appending transaction, and its base: the seq and hash the first kept
-- row follows (0 and 64 zeros until the trail is pruned).
CREATE TABLE audit_chain (
    trail     integer PRIMARY KEY,
    seq       integer NOT NULL,
    hash      text NOT NULL,
    base_seq  integer NOT NULL,
    base_hash text NOT NULL
);
INSERT INTO audit_chain (trail, seq, hash, base_seq, base_hash) VALUES
    (0, 0, '0000000000000000000000000000000000000000000000000000000000000000', 0, '0000000000000000000000000000000000000000000000000000000000000000'),
    (1, 0, '0000000000000000000000000000000000000000000000000000000000000000', 0, '0000000000000000000000000000000000000000000000000000000000000000');

-- A chain's rows in order: verify and the trail's pruning read it, and no
-- two rows of a chain share a place.
CREATE UNIQUE INDEX audit_events_chain_idx ON audit_events (trail, seq);

-- Every insert, by any statement, joins its chain: no code path can write
-- an unchained row. The preimage is store.AuditPreimage's.
CREATE TRIGGER audit_events_chain AFTER INSERT ON audit_events FOR EACH ROW BEGIN
    UPDATE audit_chain SET seq = seq + 1 WHERE trail = (NEW.trail <> 0);
    UPDATE audit_events SET seq = (SELECT seq FROM audit_chain WHERE trail = (NEW.trail <> 0)),
        prev_hash = (SELECT hash FROM audit_chain WHERE trail = (NEW.trail <> 0))
        WHERE id = NEW.id;
    UPDATE audit_events SET hash = hallmark_sha256('hallmark-audit-v1' || char(10) || prev_hash || char(10) ||
        CAST(seq AS TEXT) || char(10) || CASE WHEN trail <> 0 THEN '1' ELSE '0' END || char(10) ||
        CAST(at AS TEXT) || char(10) ||
        length(CAST(actor AS BLOB)) || ':' || actor || char(10) ||
        length(CAST(action AS BLOB)) || ':' || action || char(10) ||
        length(CAST(subject AS BLOB)) || ':' || subject || char(10) ||
        length(CAST(detail AS BLOB)) || ':' || detail || char(10) ||
        length(CAST(request_id AS BLOB)) || ':' || request_id || char(10) ||
        length(CAST(client_addr AS BLOB)) || ':' || client_addr || char(10) ||
        length(CAST(ptr_name AS BLOB)) || ':' || ptr_name || char(10) ||
        length(CAST(user_agent AS BLOB)) || ':' || user_agent || char(10))
        WHERE id = NEW.id;
    UPDATE audit_chain SET hash = (SELECT hash FROM audit_events WHERE id = NEW.id) WHERE trail = (NEW.trail <> 0);
END;

-- Operators who sign in to the panel with a client certificate: the
-- certificate's SHA-256 (of its DER) names the operator, role is what
-- they may do (viewer, operator, admin); a revoked operator is refused.
CREATE TABLE operators (
    name        text PRIMARY KEY,
    role        text NOT NULL,
    cert_sha256 text NOT NULL UNIQUE,
    not_after   integer NOT NULL,
    created_at  integer NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    revoked_at  integer
);
