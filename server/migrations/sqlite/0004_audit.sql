-- Who watched, who was refused, who got control, who used or changed a share link.
-- Tokens appear only by their id, never by their value.
CREATE TABLE audit (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    at          BIGINT NOT NULL,          -- unix ms
    event       TEXT NOT NULL,
    session_id  TEXT,
    token_id    TEXT,
    client_id   TEXT,
    detail      TEXT NOT NULL             -- JSON object
);
CREATE INDEX audit_by_session ON audit (session_id, id);
