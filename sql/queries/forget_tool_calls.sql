-- forget (runtime/forget.md): tool calls of the requests and their work
-- items (their arguments). $1 uuid[] request ids, $2 uuid[] work ids.
-- Returns the rows erased.
WITH d AS (DELETE FROM tool_calls
           WHERE request_id = ANY($1::uuid[]) OR work_id = ANY($2::uuid[])
           RETURNING 1)
SELECT count(*) FROM d
