-- What each frame takes in the store, for the per-session and whole-store byte bounds.
ALTER TABLE frames ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
UPDATE frames SET bytes = coalesce(length(data), 0) + coalesce(length(CAST(frame AS BLOB)), 0);
