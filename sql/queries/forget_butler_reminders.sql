-- forget (runtime/forget.md): reminders set for the sender (their payload).
-- $1 uuid[] the batch's request ids. Returns the rows erased.
WITH d AS (DELETE FROM butler_reminders WHERE reminder_id = ANY($1::uuid[]) RETURNING 1)
SELECT count(*) FROM d
