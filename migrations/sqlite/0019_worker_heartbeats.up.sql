-- worker_heartbeats is one row per worker process (River's client id):
-- the worker renews expires_at on the database's clock well inside the
-- bound (worker.heartbeat_ms), and any live worker returns to the queue
-- the running jobs of a worker whose heartbeat lapsed, or that an earlier
-- run of the same id left (attempted before started_at). jobs/liveness.go.
-- Times are microseconds since the epoch, as in every Hallmark table.
CREATE TABLE worker_heartbeats (
    worker_id  text PRIMARY KEY,
    started_at integer NOT NULL,
    expires_at integer NOT NULL
);
