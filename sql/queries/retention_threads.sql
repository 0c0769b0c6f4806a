-- Retention, content (runtime/retention.md): transcript messages written
-- more than $1 days ago whose run has ended ('ok', 'error', 'cancelled';
-- the active or a waiting run of an open thread keeps its messages), at
-- most $2 per run, are deleted; ended runs' error messages and file
-- references become NULL.
-- The threads and runs stay (the thread list, run status).
-- Returns (relation, action, rows).
WITH del AS (
  DELETE FROM thread_transcript WHERE cursor = ANY (ARRAY(
    SELECT t.cursor FROM thread_transcript t
    WHERE t.created_at < now() - make_interval(days => $1::int)
      AND NOT EXISTS (SELECT 1 FROM thread_runs r
                      WHERE r.run_id = t.run_id
                        AND r.state NOT IN ('ok', 'error', 'cancelled'))
    ORDER BY t.created_at
    LIMIT $2::int
    FOR UPDATE SKIP LOCKED))
  RETURNING 1
), runs AS (
  UPDATE thread_runs SET error_message = NULL, attachments = NULL
  WHERE run_id = ANY (ARRAY(
    SELECT r.run_id FROM thread_runs r
    WHERE (r.error_message IS NOT NULL OR r.attachments IS NOT NULL)
      AND r.state IN ('ok', 'error', 'cancelled')
      AND r.updated_at < now() - make_interval(days => $1::int)
    LIMIT $2::int
    FOR UPDATE SKIP LOCKED))
  RETURNING 1
)
SELECT 'thread_transcript', 'delete', (SELECT count(*) FROM del)
UNION ALL SELECT 'thread_runs', 'redact', (SELECT count(*) FROM runs)
