-- Push notification configs, one per (task, id). The config is kept as its A2A 1.0 JSON
-- (token and credentials included: deliveries need them); `version` is the protocol the
-- config was registered in ('1.0' or '0.3'), which is the shape its deliveries take.
CREATE TABLE push_configs (
    task_id     TEXT NOT NULL,
    id          TEXT NOT NULL,
    version     TEXT NOT NULL,
    config      TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (task_id, id)
);
