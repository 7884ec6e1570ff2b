-- certificate_expiring is reported once per certificate and threshold
-- ([notify] expiry_days): housekeeping records here, in the transaction
-- that queues the notification, which thresholds a certificate has been
-- reported at.
CREATE TABLE notify_expiring (
    serial text NOT NULL,
    days   integer NOT NULL,
    at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (serial, days)
);
