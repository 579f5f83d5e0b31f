-- A session's own lifetime (JSON: ttl_ms, idle_timeout_ms), and workspace snapshots: one
-- row each (complete once every chunk is written), the archive (tar + zstd) in chunks, so
-- that it streams both ways and any node of a cluster restores it.
ALTER TABLE sessions ADD COLUMN lifetime TEXT;
CREATE TABLE snapshots (
    id          TEXT PRIMARY KEY,
    instance_id TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    label       TEXT,
    bytes       BIGINT NOT NULL,
    files       BIGINT NOT NULL,
    created_at  BIGINT NOT NULL,
    complete    BIGINT NOT NULL
);
CREATE TABLE snapshot_chunks (
    snapshot_id TEXT NOT NULL,
    n           BIGINT NOT NULL,
    data        BLOB NOT NULL,
    PRIMARY KEY (snapshot_id, n)
);
