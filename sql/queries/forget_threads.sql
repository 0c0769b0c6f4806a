-- forget (runtime/forget.md): threads ($1 text[]) left with no run and no
-- transcript message once the sender's are gone (a thread others also
-- wrote in keeps its row and their messages). Returns the rows erased.
WITH d AS (DELETE FROM threads t
           WHERE t.thread_id = ANY($1::text[])
             AND NOT EXISTS (SELECT 1 FROM thread_runs r
                             WHERE r.thread_id = t.thread_id)
             AND NOT EXISTS (SELECT 1 FROM thread_transcript x
                             WHERE x.thread_id = t.thread_id)
           RETURNING 1)
SELECT count(*) FROM d
