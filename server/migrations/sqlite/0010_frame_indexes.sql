-- Seeks into a session's history: its keyframes by sequence (a page that starts at the
-- keyframe before a point, and the last keyframe of a closed session) and its frames by
-- time, each an index lookup rather than a scan of the session's frames.
CREATE INDEX frames_by_kind ON frames (session_id, kind, sequence);
CREATE INDEX frames_by_time ON frames (session_id, created_at);
