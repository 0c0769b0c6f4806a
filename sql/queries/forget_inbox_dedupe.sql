-- forget (runtime/forget.md): dedupe keys of the requests.
-- $1 uuid[] the batch's request ids. Returns the rows erased.
WITH d AS (DELETE FROM inbox_dedupe WHERE request_id = ANY($1::uuid[]) RETURNING 1)
SELECT count(*) FROM d
