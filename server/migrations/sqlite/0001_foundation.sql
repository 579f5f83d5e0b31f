-- Sessions, tokens and the replay frames of every session. Plain types only (TEXT,
-- BIGINT, INTEGER) so that the same schema runs on PostgreSQL. Times are unix milliseconds.

CREATE TABLE sessions (
    id            TEXT PRIMARY KEY,
    instance_id   TEXT NOT NULL,
    label         TEXT,
    argv          TEXT NOT NULL,          -- JSON array
    cwd           TEXT,
    env           TEXT NOT NULL,          -- JSON object
    backend       TEXT NOT NULL,
    class         TEXT NOT NULL,
    cols          INTEGER NOT NULL,
    rows          INTEGER NOT NULL,
    state         TEXT NOT NULL,          -- running | closed
    exit_code     INTEGER,
    close_reason  TEXT,
    last_sequence BIGINT NOT NULL DEFAULT 0,
    replay_floor  BIGINT NOT NULL DEFAULT 0, -- frames up to here were pruned by retention
    created_at    BIGINT NOT NULL,
    closed_at     BIGINT
);
CREATE INDEX sessions_instance ON sessions (instance_id, created_at);

CREATE TABLE tokens (
    id          TEXT PRIMARY KEY,
    hash        TEXT NOT NULL UNIQUE,     -- hex SHA-256 of the token; the token itself is never stored
    scope       TEXT NOT NULL,            -- pty:observe | pty:control | pty:admin
    session_id  TEXT,
    label       TEXT,
    kind        TEXT NOT NULL,            -- cli | bootstrap | share
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT,
    revoked_at  BIGINT
);
CREATE INDEX tokens_session ON tokens (session_id);

-- Every broadcast frame of a session, as the exact envelope text sent to clients.
CREATE TABLE frames (
    session_id  TEXT NOT NULL,
    sequence    BIGINT NOT NULL,
    kind        TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    frame       TEXT NOT NULL,
    PRIMARY KEY (session_id, sequence)
);
