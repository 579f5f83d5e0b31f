-- The size a session started at (cols and rows follow its resizes): where a recording of
-- it begins. NULL for sessions stored before this column.
ALTER TABLE sessions ADD COLUMN start_cols INTEGER;
ALTER TABLE sessions ADD COLUMN start_rows INTEGER;
