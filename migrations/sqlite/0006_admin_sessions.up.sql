-- admin_sessions are the admin panel's live sign-ins, shared by every
-- frontend replica. The session cookie (an HMAC under a key derived from
-- the operator token) is accepted only while its row exists: signing out
-- deletes the row, so a copy of the cookie stops working at once instead of
-- at its expiry. id is the SHA-256 of the cookie's session id, so the table
-- holds nothing a browser could present.
CREATE TABLE admin_sessions (
    id         text PRIMARY KEY,
    operator   text NOT NULL,
    created_at integer NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    expires_at integer NOT NULL
);
-- Expired rows are removed when an operator signs in.
CREATE INDEX admin_sessions_expires_idx ON admin_sessions (expires_at);
