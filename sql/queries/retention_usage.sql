-- Retention, usage (runtime/retention.md): per-day usage of UTC days more
-- than $1 days back, and work items finished more than $1 days ago whose
-- request is no longer open (their usage columns are the per-item
-- accounting), at most $2 rows each per run, are deleted.
-- Returns (relation, action, rows).
WITH days AS (
  DELETE FROM usage_daily WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM usage_daily
    WHERE day < (now() AT TIME ZONE 'UTC')::date - $1::int
    LIMIT $2::int))
  RETURNING 1
), work AS (
  DELETE FROM route_work WHERE work_id = ANY (ARRAY(
    SELECT w.work_id FROM route_work w
    WHERE w.created_at < now() - make_interval(days => $1::int)
      AND w.state IN ('ok', 'error', 'cancelled')
      AND w.finished_at < now() - make_interval(days => $1::int)
      AND NOT EXISTS (SELECT 1 FROM message_inbox m
                      WHERE m.request_id = w.request_id
                        AND m.lifecycle_state IN ('accepted', 'progress'))
    LIMIT $2::int
    FOR UPDATE SKIP LOCKED))
  RETURNING 1
)
SELECT 'usage_daily', 'delete', (SELECT count(*) FROM days)
UNION ALL SELECT 'route_work', 'delete', (SELECT count(*) FROM work)
