-- idempotency/v1: the first response to each message id, and the hash of the request it
-- answered; status 0 while that request runs on node_id.
CREATE TABLE idempotency (
    message_id   TEXT PRIMARY KEY,
    request_hash TEXT NOT NULL,
    binding      TEXT NOT NULL,
    node_id      TEXT NOT NULL,
    status       BIGINT NOT NULL,
    headers      TEXT NOT NULL,
    body         BLOB,
    inserted_at  BIGINT NOT NULL
);
CREATE INDEX idempotency_inserted_at ON idempotency (inserted_at);

