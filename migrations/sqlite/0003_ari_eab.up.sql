-- Renewal information (RFC 9773) and external account binding (RFC 8555
-- §7.3.4).

-- renewal_windows holds the windows an operator moved (hallmark ari move);
-- a certificate without a row has the profile's computed window.
CREATE TABLE renewal_windows (
    serial       text PRIMARY KEY REFERENCES certificates (serial),
    window_start integer NOT NULL,
    window_end   integer NOT NULL,
    reason       text NOT NULL,
    actor        text NOT NULL,
    moved_at     integer NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER))
);

-- eab_keys are the MAC keys `hallmark eab create` issues. account_id is set
-- once, when the key binds an account; a key binds one account only.
CREATE TABLE eab_keys (
    seq               INTEGER PRIMARY KEY AUTOINCREMENT,
    id                text NOT NULL UNIQUE,
    mac_key           blob NOT NULL,
    label             text NOT NULL DEFAULT '',
    allowed_domains   text NOT NULL DEFAULT '[]',
    allowed_ip_ranges text NOT NULL DEFAULT '[]',
    prevalidated      integer NOT NULL DEFAULT 0,
    account_id        text UNIQUE REFERENCES accounts (id),
    created_at        integer NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    bound_at          integer
);
