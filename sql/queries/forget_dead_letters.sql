-- forget (runtime/forget.md): failed subrequests (their error messages).
-- $1 uuid[] the batch's request ids. Returns the rows erased.
WITH d AS (DELETE FROM dead_letters WHERE request_id = ANY($1::uuid[]) RETURNING 1)
SELECT count(*) FROM d
