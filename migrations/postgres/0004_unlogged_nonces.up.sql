-- Nearly every ACME request consumes a nonce, and at one request at a time
-- the WAL flush of that insert was a third of its wait. An unlogged table
-- writes no WAL, so a transaction that touches only unlogged tables commits
-- without waiting for the disk (synchronous_commit stays on for everything
-- else: orders, challenges and certificates are as durable as before).
--
-- PostgreSQL empties unlogged tables after a crash and on a promoted
-- standby. An empty consumed set alone would let nonces consumed before the
-- crash be used again, so nonces carry the epoch below and are accepted only
-- while it is current: the crash that empties nonces_consumed also empties
-- nonce_epoch, the first frontend to notice starts a new epoch, and every
-- earlier nonce is refused as badNonce (RFC 8555 §6.5 lets a server refuse
-- any nonce; clients retry with the fresh one the error carries).
ALTER TABLE nonces_consumed SET UNLOGGED;

CREATE UNLOGGED TABLE nonce_epoch (
    id    smallint PRIMARY KEY CHECK (id = 1),
    epoch bigint NOT NULL CHECK (epoch <> 0)
);
