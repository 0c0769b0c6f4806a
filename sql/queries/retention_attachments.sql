-- Retention, attachments (runtime/attachments.md): rows last stored more
-- than $1 days ago, at most $2 per run, oldest first, are deleted (as the
-- store's own sweep, attachment_sweep.sql, does after its writes).
-- Returns (relation, action, rows).
WITH del AS (
  DELETE FROM attachments
  WHERE sha256 IN (SELECT sha256 FROM attachments
                   WHERE created_at < now() - make_interval(days => $1::int)
                   ORDER BY created_at
                   LIMIT $2::int)
  RETURNING 1
)
SELECT 'attachments', 'delete', (SELECT count(*) FROM del)
