-- Retention, ledger (runtime/retention.md): outbound sends settled ('sent',
-- 'skipped', 'dead') more than $1 days ago whose request is no longer open
-- in the inbox, at most $2 per run, are deleted. A send still 'sending' is
-- owed and stays.
-- Returns (relation, action, rows).
WITH del AS (
  DELETE FROM outbound_ledger WHERE ctid = ANY (ARRAY(
    SELECT o.ctid FROM outbound_ledger o
    WHERE o.created_at < now() - make_interval(days => $1::int)
      AND o.updated_at < now() - make_interval(days => $1::int)
      AND o.state IN ('sent', 'skipped', 'dead')
      AND NOT EXISTS (SELECT 1 FROM message_inbox m
                      WHERE m.request_id = o.request_id
                        AND m.lifecycle_state IN ('accepted', 'progress'))
    LIMIT $2::int))
  RETURNING 1
)
SELECT 'outbound_ledger', 'delete', (SELECT count(*) FROM del)
