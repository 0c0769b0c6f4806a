-- forget (runtime/forget.md): each subrequest's prompt and response.
-- $1 uuid[] the batch's request ids. Returns the rows erased.
WITH d AS (DELETE FROM fanout_execution_log WHERE request_id = ANY($1::uuid[]) RETURNING 1)
SELECT count(*) FROM d
