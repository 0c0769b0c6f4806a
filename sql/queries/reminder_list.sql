-- The pending reminders butler $1 set for sender $3 on channel $2 (tool
-- remind_list), soonest first, at most $4.
SELECT reminder_id::text,
       to_char(due_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
       payload
FROM butler_reminders
WHERE butler = $1::text AND source_channel = $2::text AND source_sender = $3::text
  AND state = 'pending'
ORDER BY due_at
LIMIT $4::integer
