-- `hallmark reload` records a config.reload_requested audit event; every
-- frontend and worker polls for the newest one (store.ReloadRequested).
-- This partial index makes that poll one index read, costing the other
-- audit events nothing.
CREATE INDEX audit_events_reload_idx ON audit_events (id) WHERE action = 'config.reload_requested';
