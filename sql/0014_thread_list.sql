-- Listing conversation threads (GET /v1/threads, actors/README.md
-- "Threads"): newest first by the time of their last transcript message,
-- paged by the key (last_message_at, thread_id), so a page is one index
-- range and a thread inserted meanwhile never shifts the pages after it.
-- thread_turn_insert and thread_reply_insert keep the column current.
ALTER TABLE threads ADD COLUMN last_message_at timestamptz;

UPDATE threads t
SET last_message_at = COALESCE((SELECT max(x.created_at)
                                FROM thread_transcript x
                                WHERE x.thread_id = t.thread_id),
                               t.updated_at);

ALTER TABLE threads ALTER COLUMN last_message_at SET DEFAULT now();
ALTER TABLE threads ALTER COLUMN last_message_at SET NOT NULL;

-- Scanned backwards for newest first.
CREATE INDEX threads_last_message ON threads (last_message_at, thread_id);

-- A thread's latest run (its run status), without scanning its history.
CREATE INDEX thread_runs_thread ON thread_runs (thread_id, created_at);
