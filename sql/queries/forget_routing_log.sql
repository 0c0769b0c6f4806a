-- forget (runtime/forget.md): route attempts (their error messages).
-- $1 uuid[] the batch's request ids. Returns the rows erased.
WITH d AS (DELETE FROM routing_log WHERE request_id = ANY($1::uuid[]) RETURNING 1)
SELECT count(*) FROM d
