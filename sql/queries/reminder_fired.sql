-- Marks a claimed reminder fired once its work item is stored. $1
-- reminder_id.
UPDATE butler_reminders SET state = 'fired', fired_at = now(),
                            lease_until = NULL
WHERE reminder_id = $1::uuid AND state = 'firing'
RETURNING 1
