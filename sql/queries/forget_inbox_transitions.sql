-- forget (runtime/forget.md): lifecycle transitions (no text; the requests go).
-- $1 uuid[] the batch's request ids. Returns the rows erased.
WITH d AS (DELETE FROM inbox_transitions WHERE request_id = ANY($1::uuid[]) RETURNING 1)
SELECT count(*) FROM d
