-- Sequences a session may hand out before it must reserve more: after a crash, numbering
-- goes on above this, so no sequence a viewer saw is reused.
ALTER TABLE sessions ADD COLUMN sequence_reserved INTEGER NOT NULL DEFAULT 0;
