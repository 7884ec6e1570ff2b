-- upstream_orders is the journal of the orders relay backends placed at
-- their upstream ACME CA, one per Hallmark order and backend. The worker
-- writes the row as soon as the upstream order exists and before it
-- finalizes it, so an attempt that dies after the upstream issued (a
-- worker killed, a timeout, a connection lost during the download)
-- leaves the upstream order's URL here, and the retry, on any worker,
-- fetches that order's certificate instead of placing a second one: a
-- second live upstream certificate Hallmark has no record of, and a
-- second count against a public CA's rate limits. The row stays after
-- the certificate is stored: it is the record of which upstream order
-- gave it, and what a retry reads when storing the certificate failed.
--
-- account_url is the upstream account (its KID) that placed the order:
-- only that account can read or finalize it, so a worker with another
-- account key places a new order, replacing the row, and its warning
-- names the one replaced. Possible orphans, for an operator, are the rows
-- whose Hallmark order is invalid (it failed or was abandoned after the
-- upstream order was placed; docs/backends.md has the query): the
-- upstream order at order_url says whether it issued. A row is deleted
-- with its order (nothing deletes orders today; SQLite enforces the key:
-- store/sqlite opens every connection with foreign_keys on).
CREATE TABLE upstream_orders (
    order_id    text NOT NULL REFERENCES orders (id) ON DELETE CASCADE,
    backend     text NOT NULL,
    account_url text NOT NULL,
    order_url   text NOT NULL,
    placed_at   integer NOT NULL,
    PRIMARY KEY (order_id, backend)
);
