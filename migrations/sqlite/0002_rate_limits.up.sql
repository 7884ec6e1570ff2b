-- Indexes for the rate limits (store/sqlstore/ratelimit.go), which count the
-- records themselves on the database clock so every replica agrees.

-- Orders per account per window.
CREATE INDEX orders_account_created_idx ON orders (account_id, created_at);
-- Certificates per registered domain per window.
CREATE INDEX certificates_issued_idx ON certificates (issued_at);
-- Failed validations per account and name, pending authorizations per account.
CREATE INDEX authorizations_account_status_idx ON authorizations (account_id, status, updated_at);
