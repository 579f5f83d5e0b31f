-- A202 transaction streams: every accepted object, as the canonical bytes it arrived as,
-- at its place in its transaction's stream ('' is the stream of objects bound to no
-- transaction). An object id and version is held once across all streams.
CREATE TABLE a202_objects (
    transaction_id  TEXT NOT NULL,
    sequence        BIGINT NOT NULL,
    object_id       TEXT NOT NULL,
    version         BIGINT NOT NULL,
    object_type     TEXT NOT NULL,
    content_hash    TEXT NOT NULL,
    canonical       BLOB NOT NULL,
    carrier         TEXT NOT NULL,
    received_at     TEXT NOT NULL,
    PRIMARY KEY (transaction_id, sequence),
    UNIQUE (object_id, version)
);
