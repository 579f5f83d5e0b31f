-- A2A tasks. The task itself is kept as its A2A 1.0 JSON (history and artifacts
-- included); the columns beside it are what listings filter and sort on.
CREATE TABLE tasks (
    id          TEXT PRIMARY KEY,
    context_id  TEXT NOT NULL,
    state       TEXT NOT NULL,
    status_at   BIGINT NOT NULL,          -- unix ms of status.timestamp
    task        TEXT NOT NULL
);
CREATE INDEX tasks_by_status_time ON tasks (status_at, id);
CREATE INDEX tasks_by_context ON tasks (context_id, status_at);
