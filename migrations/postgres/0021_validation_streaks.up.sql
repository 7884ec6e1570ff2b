-- validation_streaks are each account's unbroken runs of failed
-- validations per identifier: the verdict's transaction adds a failure to
-- the run on invalid and deletes it on valid. The frontend pauses an
-- account for an identifier whose run is long and old enough ([limits]
-- pause_after_days, pause_min_failures), deciding on the database clock at
-- newOrder; an unpause (the subscriber's page, an operator) deletes runs.
CREATE TABLE validation_streaks (
    account_id       text NOT NULL REFERENCES accounts (id),
    identifier_type  text NOT NULL,
    identifier_value text NOT NULL,
    failures         bigint NOT NULL,
    first_failed_at  timestamptz NOT NULL,
    last_failed_at   timestamptz NOT NULL,
    PRIMARY KEY (account_id, identifier_type, identifier_value)
);
-- The operators' listing of every paused account, oldest run first.
CREATE INDEX validation_streaks_first_idx ON validation_streaks (first_failed_at);
