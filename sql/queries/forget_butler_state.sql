-- forget (runtime/forget.md): the butlers' state kept for the sender (scope "sender").
-- $1 channel, $2 identity, $3 most rows per call. Returns the rows erased.
WITH d AS (DELETE FROM butler_state WHERE ctid IN (SELECT ctid FROM butler_state
                                          WHERE scope = 'sender:' || $1 || ':' || $2 LIMIT $3::int)
           RETURNING 1)
SELECT count(*) FROM d
