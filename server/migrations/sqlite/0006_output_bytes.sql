-- Output frames keep their bytes and the envelope id they went out under: their JSON text
-- is rendered again on replay, byte for byte, and never encoded for binary viewers. The
-- bytes are an LZ4 block (size-prepended, `compression` 'lz4') when that is smaller.
-- Every other frame keeps its envelope text. SQLite cannot relax NOT NULL in place, so
-- the table is rebuilt.
CREATE TABLE frames_next (
    session_id   TEXT NOT NULL,
    sequence     BIGINT NOT NULL,
    kind         TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    frame        TEXT,                -- the envelope text (every kind but Output)
    envelope_id  TEXT,                -- Output: the envelope's id
    data         BLOB,                -- Output: the PTY bytes
    compression  TEXT,                -- Output: NULL (as they are) or 'lz4'
    PRIMARY KEY (session_id, sequence),
    CHECK ((frame IS NULL) <> (data IS NULL)),
    CHECK ((envelope_id IS NULL) = (data IS NULL)),
    CHECK (compression IS NULL OR (compression = 'lz4' AND data IS NOT NULL))
);
INSERT INTO frames_next (session_id, sequence, kind, created_at, frame)
    SELECT session_id, sequence, kind, created_at, frame FROM frames;
DROP TABLE frames;
ALTER TABLE frames_next RENAME TO frames;
