-- Output frames keep their raw bytes and the envelope id they went out under: their JSON
-- text is rendered again on replay, byte for byte, so a flood is stored a quarter smaller
-- and never encoded for binary viewers. Every other frame keeps its envelope text.
-- SQLite cannot relax NOT NULL in place, so the table is rebuilt.
CREATE TABLE frames_next (
    session_id   TEXT NOT NULL,
    sequence     BIGINT NOT NULL,
    kind         TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    frame        TEXT,                -- the envelope text (every kind but Output)
    envelope_id  TEXT,                -- Output: the envelope's id
    data         BLOB,                -- Output: the PTY bytes
    PRIMARY KEY (session_id, sequence),
    CHECK ((frame IS NULL) <> (data IS NULL)),
    CHECK ((envelope_id IS NULL) = (data IS NULL))
);
INSERT INTO frames_next (session_id, sequence, kind, created_at, frame)
    SELECT session_id, sequence, kind, created_at, frame FROM frames;
DROP TABLE frames;
ALTER TABLE frames_next RENAME TO frames;
