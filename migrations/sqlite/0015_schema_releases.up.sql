-- schema_releases records which Hallmark release migrated the database:
-- `hallmark migrate` (and `hallmark up`) add a row when the release that
-- runs them differs from the newest row's, or the schema moved on, so an
-- operator can tell which binary last touched the schema (`hallmark
-- migrate status`). version is the binary's `git describe`, commit_hash
-- its commit and built its build date, as the binary reports them
-- (`hallmark version`; "unknown" for a build that recorded none);
-- schema_version is the newest migration applied when it ran. Rows are
-- never updated or deleted.
CREATE TABLE schema_releases (
    id             integer PRIMARY KEY AUTOINCREMENT,
    version        text NOT NULL,
    commit_hash    text NOT NULL,
    built          text NOT NULL,
    schema_version integer NOT NULL,
    migrated_at    integer NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER))
);
