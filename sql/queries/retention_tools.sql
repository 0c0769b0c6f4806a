-- Retention, content (runtime/retention.md), the small tables of sessions'
-- tools, at most $2 rows each per run: reminders fired or cancelled more
-- than $1 days ago are deleted (pending and firing ones are owed and
-- stay); answered or expired approvals older than that keep their row
-- (audit) with the summary of the tool's arguments emptied ('').
-- Returns (relation, action, rows).
WITH reminders AS (
  DELETE FROM butler_reminders
  WHERE reminder_id = ANY (ARRAY(
    SELECT reminder_id FROM butler_reminders
    WHERE state IN ('fired', 'cancelled')
      AND coalesce(fired_at, created_at)
          < now() - make_interval(days => $1::int)
    LIMIT $2::int
    FOR UPDATE SKIP LOCKED))
  RETURNING 1
), approvals AS (
  UPDATE approvals SET summary = ''
  WHERE approval_id = ANY (ARRAY(
    SELECT approval_id FROM approvals
    WHERE status <> 'pending' AND summary <> ''
      AND coalesce(answered_at, expires_at)
          < now() - make_interval(days => $1::int)
    LIMIT $2::int
    FOR UPDATE SKIP LOCKED))
  RETURNING 1
)
SELECT 'butler_reminders', 'delete', (SELECT count(*) FROM reminders)
UNION ALL SELECT 'approvals', 'redact', (SELECT count(*) FROM approvals)
