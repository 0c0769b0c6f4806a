-- forget (runtime/forget.md): approval questions put to the sender.
-- $1 channel, $2 identity, $3 most rows per call. Returns the rows erased.
WITH d AS (DELETE FROM approvals WHERE ctid IN (SELECT ctid FROM approvals
                                          WHERE requester_channel = $1 AND requester_sender = $2 LIMIT $3::int)
           RETURNING 1)
SELECT count(*) FROM d
