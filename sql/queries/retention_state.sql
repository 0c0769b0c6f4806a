-- Retention, state (runtime/retention.md): butlers' tool state (their own
-- and each person's scope) not written for $1 days, at most $2 rows per
-- run, is deleted.
-- Returns (relation, action, rows).
WITH del AS (
  DELETE FROM butler_state WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM butler_state
    WHERE updated_at < now() - make_interval(days => $1::int)
    LIMIT $2::int))
  RETURNING 1
)
SELECT 'butler_state', 'delete', (SELECT count(*) FROM del)
