-- forget (runtime/forget.md): the plans (their segments' text).
-- $1 uuid[] the batch's request ids. Returns the rows erased.
WITH d AS (DELETE FROM fanout_plans WHERE request_id = ANY($1::uuid[]) RETURNING 1)
SELECT count(*) FROM d
