-- The schema SQLite reaches at its migration 0010 (see ../sqlite), in PostgreSQL's types:
-- BYTEA for blobs, BIGINT for every count and time, an identity for the audit's ids.
-- From 0011 on, each migration has its twin in both directories.

CREATE TABLE sessions (
    id                TEXT PRIMARY KEY,
    instance_id       TEXT NOT NULL,
    label             TEXT,
    argv              TEXT NOT NULL,
    cwd               TEXT,
    env               TEXT NOT NULL,
    backend           TEXT NOT NULL,
    class             TEXT NOT NULL,
    cols              BIGINT NOT NULL,
    rows              BIGINT NOT NULL,
    state             TEXT NOT NULL,
    exit_code         INTEGER,
    close_reason      TEXT,
    last_sequence     BIGINT NOT NULL DEFAULT 0,
    replay_floor      BIGINT NOT NULL DEFAULT 0,
    created_at        BIGINT NOT NULL,
    closed_at         BIGINT,
    sequence_reserved BIGINT NOT NULL DEFAULT 0,
    start_cols        BIGINT,
    start_rows        BIGINT
);
CREATE INDEX sessions_instance ON sessions (instance_id, created_at);

CREATE TABLE tokens (
    id          TEXT PRIMARY KEY,
    hash        TEXT NOT NULL UNIQUE,
    scope       TEXT NOT NULL,
    session_id  TEXT,
    label       TEXT,
    kind        TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT,
    revoked_at  BIGINT
);
CREATE INDEX tokens_session ON tokens (session_id);

CREATE TABLE frames (
    session_id   TEXT NOT NULL,
    sequence     BIGINT NOT NULL,
    kind         TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    frame        TEXT,
    envelope_id  TEXT,
    data         BYTEA,
    compression  TEXT,
    bytes        BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (session_id, sequence),
    CHECK ((frame IS NULL) <> (data IS NULL)),
    CHECK ((envelope_id IS NULL) = (data IS NULL)),
    CHECK (compression IS NULL OR (compression = 'lz4' AND data IS NOT NULL))
);
CREATE INDEX frames_by_kind ON frames (session_id, kind, sequence);
CREATE INDEX frames_by_time ON frames (session_id, created_at);

CREATE TABLE tasks (
    id          TEXT PRIMARY KEY,
    context_id  TEXT NOT NULL,
    state       TEXT NOT NULL,
    status_at   BIGINT NOT NULL,
    task        TEXT NOT NULL
);
CREATE INDEX tasks_by_status_time ON tasks (status_at, id);
CREATE INDEX tasks_by_context ON tasks (context_id, status_at);

CREATE TABLE push_configs (
    task_id     TEXT NOT NULL,
    id          TEXT NOT NULL,
    version     TEXT NOT NULL,
    config      TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (task_id, id)
);

CREATE TABLE audit (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          BIGINT NOT NULL,
    event       TEXT NOT NULL,
    session_id  TEXT,
    token_id    TEXT,
    client_id   TEXT,
    detail      TEXT NOT NULL
);
CREATE INDEX audit_by_session ON audit (session_id, id);

CREATE TABLE a202_objects (
    transaction_id  TEXT NOT NULL,
    sequence        BIGINT NOT NULL,
    object_id       TEXT NOT NULL,
    version         BIGINT NOT NULL,
    object_type     TEXT NOT NULL,
    content_hash    TEXT NOT NULL,
    canonical       BYTEA NOT NULL,
    carrier         TEXT NOT NULL,
    received_at     TEXT NOT NULL,
    PRIMARY KEY (transaction_id, sequence),
    UNIQUE (object_id, version)
);
