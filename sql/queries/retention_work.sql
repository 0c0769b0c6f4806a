-- Retention, content (runtime/retention.md): the envelope and response of
-- work items finished ('ok', 'error', 'cancelled') more than $1 days ago,
-- at most $2 per run, oldest first, unless their request is still open in
-- the inbox (a reply it owes may still need them). Items of schedules,
-- reminders and sessions' route_to have no inbox row and go by their own
-- state. The envelope becomes '{}' and the response NULL; the row stays
-- (its usage columns are the per-item accounting).
-- Returns (relation, action, rows).
WITH upd AS (
  UPDATE route_work SET envelope = '{}', response = NULL
  WHERE work_id = ANY (ARRAY(
    SELECT w.work_id FROM route_work w
    WHERE w.state IN ('ok', 'error', 'cancelled')
      AND w.envelope::text <> '{}'
      AND w.finished_at < now() - make_interval(days => $1::int)
      AND NOT EXISTS (SELECT 1 FROM message_inbox m
                      WHERE m.request_id = w.request_id
                        AND m.lifecycle_state IN ('accepted', 'progress'))
    ORDER BY w.finished_at
    LIMIT $2::int
    FOR UPDATE SKIP LOCKED))
  RETURNING 1
)
SELECT 'route_work', 'redact', (SELECT count(*) FROM upd)
