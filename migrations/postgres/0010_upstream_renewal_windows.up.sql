-- upstream_renewal_windows holds what a relay backend's upstream CA says of
-- the renewal of a certificate it issued (its ARI, RFC 9773): the worker
-- asks the upstream for each live relay certificate and keeps the answer
-- here, apart from renewal_windows (an operator's moves), so that neither
-- overwrites the other; renewalInfo serves the earlier of the two.
--
-- A row with no window is a certificate the upstream knows nothing of
-- (it answered 404 or nonsense): asked again at next_check_at, like any
-- other, so one such certificate cannot crowd the others out of a run.
-- next_check_at honours the upstream's Retry-After.
CREATE TABLE upstream_renewal_windows (
    serial          text PRIMARY KEY REFERENCES certificates (serial),
    window_start    timestamptz,
    window_end      timestamptz,
    explanation_url text NOT NULL DEFAULT '',
    checked_at      timestamptz NOT NULL,
    next_check_at   timestamptz NOT NULL
);

-- The live certificates of relay backends, the refresh's candidates: a
-- partial index, so that only a relay's issuance pays for an entry (an
-- index on certificates (issuer_id) would make every issuance pay).
CREATE INDEX certificates_relay_live_idx ON certificates (issuer_id, not_after)
    WHERE issuer_id LIKE 'relay:%' AND revoked_at IS NULL;
