-- forget (runtime/forget.md): work items: envelopes, responses (the butlers' and the messenger's).
-- $1 uuid[] the batch's request ids. Returns the rows erased.
WITH d AS (DELETE FROM route_work WHERE request_id = ANY($1::uuid[]) RETURNING 1)
SELECT count(*) FROM d
