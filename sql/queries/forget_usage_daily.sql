-- forget (runtime/forget.md): the sender's token and cost totals (keyed by identity alone, as budgets are).
-- $1 channel, $2 identity, $3 most rows per call. Returns the rows erased.
WITH d AS (DELETE FROM usage_daily WHERE ctid IN (SELECT ctid FROM usage_daily
                                          WHERE sender = $2 AND $1::text IS NOT NULL LIMIT $3::int)
           RETURNING 1)
SELECT count(*) FROM d
