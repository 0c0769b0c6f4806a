-- forget (runtime/forget.md): reminders for the sender (those not found by id).
-- $1 channel, $2 identity, $3 most rows per call. Returns the rows erased.
WITH d AS (DELETE FROM butler_reminders WHERE ctid IN (SELECT ctid FROM butler_reminders
                                          WHERE source_channel = $1 AND source_sender = $2 LIMIT $3::int)
           RETURNING 1)
SELECT count(*) FROM d
