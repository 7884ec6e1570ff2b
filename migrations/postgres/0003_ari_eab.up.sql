-- Renewal information (RFC 9773) and external account binding (RFC 8555
-- §7.3.4).

-- renewal_windows holds the windows an operator moved (hallmark ari move);
-- a certificate without a row has the profile's computed window.
CREATE TABLE renewal_windows (
    serial       text PRIMARY KEY REFERENCES certificates (serial),
    window_start timestamptz NOT NULL,
    window_end   timestamptz NOT NULL,
    reason       text NOT NULL,
    actor        text NOT NULL,
    moved_at     timestamptz NOT NULL DEFAULT now()
);

-- eab_keys are the MAC keys `hallmark eab create` issues. account_id is set
-- once, when the key binds an account; a key binds one account only.
CREATE TABLE eab_keys (
    seq               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id                text NOT NULL UNIQUE,
    mac_key           bytea NOT NULL,
    label             text NOT NULL DEFAULT '',
    allowed_domains   text NOT NULL DEFAULT '[]',
    allowed_ip_ranges text NOT NULL DEFAULT '[]',
    prevalidated      boolean NOT NULL DEFAULT false,
    account_id        text UNIQUE REFERENCES accounts (id),
    created_at        timestamptz NOT NULL DEFAULT now(),
    bound_at          timestamptz
);
