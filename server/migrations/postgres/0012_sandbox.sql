-- A sandboxed session's workspace and limits (JSON: network, memory_bytes, pids, cpus).
ALTER TABLE sessions ADD COLUMN workspace TEXT;
ALTER TABLE sessions ADD COLUMN sandbox TEXT;
