-- forget (runtime/forget.md): the sender's thread runs (after their transcript).
-- $1 uuid[] the batch's request ids. Returns the rows erased.
WITH d AS (DELETE FROM thread_runs WHERE run_id = ANY($1::uuid[]) RETURNING 1)
SELECT count(*) FROM d
