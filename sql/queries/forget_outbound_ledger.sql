-- forget (runtime/forget.md): the sends and reactions of the requests (a reply's record).
-- $1 uuid[] the batch's request ids. Returns the rows erased.
WITH d AS (DELETE FROM outbound_ledger WHERE request_id = ANY($1::uuid[]) RETURNING 1)
SELECT count(*) FROM d
