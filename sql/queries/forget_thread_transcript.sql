-- forget (runtime/forget.md): the turns and answers of the sender's thread runs.
-- $1 uuid[] the batch's request ids. Returns the rows erased.
WITH d AS (DELETE FROM thread_transcript WHERE run_id = ANY($1::uuid[]) RETURNING 1)
SELECT count(*) FROM d
