-- forget (runtime/forget.md): the messages themselves (after everything that derives from them).
-- $1 uuid[] the batch's request ids. Returns the rows erased.
WITH d AS (DELETE FROM message_inbox WHERE request_id = ANY($1::uuid[]) RETURNING 1)
SELECT count(*) FROM d
