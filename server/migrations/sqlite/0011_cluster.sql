-- Nodes of a cluster (one, on SQLite): each heartbeats its row. A session runs on the node
-- that created it ('' for sessions stored before nodes).
CREATE TABLE nodes (
    id             TEXT PRIMARY KEY,
    advertise_url  TEXT NOT NULL,
    started_at     BIGINT NOT NULL,
    last_seen      BIGINT NOT NULL
);
ALTER TABLE sessions ADD COLUMN node_id TEXT NOT NULL DEFAULT '';
CREATE INDEX sessions_by_node ON sessions (node_id, state);
-- Values the whole cluster shares (the secret nodes forward requests to each other with).
CREATE TABLE cluster (
    name   TEXT PRIMARY KEY,
    value  TEXT NOT NULL
);
